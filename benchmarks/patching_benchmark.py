"""Benchmark: activation patching's three grids (layer_output, attention_output, mlp_output: 3 x blocks x positions
patched runs), batched from the patched block on, against the unbatched sweep (one full forward of the corrupted
prompt per cell, a forward hook writing the clean value), side by side in one process.

Model: SmolLM2-135M-Instruct (30 blocks) from the project's cache, "Fact: the capital city of France is" against
"... Italy is" (8 tokens each, no BOS), torch on this machine's threads. For each precision (``--dtypes``, names of
``model_backend.compute``), both exactness checks, then the time to the first block's row as the page gets it (the
corrupted prompt's capture, which records the blocks' calls, then block 0's row; the clean run is the page's own run
already), the time for all blocks' rows, and the unbatched sweep's time per cell, measured on ``--sweep-cells`` cells
spread over blocks and sites and multiplied out to the whole grid (every cell costs one full forward, whatever it
patches). Medians of ``--repeats`` runs, the precisions taking turns; the targets are ``TARGET_SECONDS`` for all three
grids and ``FIRST_ROW_TARGET_SECONDS`` to the first row. The batched patching leaves out the patches that change nothing
(the positions before the swapped word): ``--corrupted`` times another pair, such as one that also differs at its first
token, where every position is patched.

    python benchmarks/patching_benchmark.py [--repeats 5] [--sweep-cells 24] [--dtypes bfloat16-matmuls float32]
    python benchmarks/patching_benchmark.py --corrupted "Note: the capital city of Italy is"
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model_backend import load_model  # noqa: E402
from model_backend.capture import capture_token_ids  # noqa: E402
from model_backend.interventions import changed_output_hook  # noqa: E402
from model_backend.names import full_name  # noqa: E402
from model_backend.patching import PATCHED_SITES, pair_with_run, patch_block, patching_of  # noqa: E402

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
CLEAN, CORRUPTED = "Fact: the capital city of France is", "Fact: the capital city of Italy is"  # 8 tokens each
TARGET_SECONDS, FIRST_ROW_TARGET_SECONDS = 3.0, 0.5


def batched(loaded, clean_run, corrupted: str) -> tuple[float, float]:
    """(seconds to the first block's row, seconds to every block's row), as the page computes them."""
    started = time.perf_counter()
    pair = pair_with_run(loaded, clean_run, corrupted)
    patch_block(loaded, pair, 0)
    first = time.perf_counter() - started
    for layer in range(1, loaded.n_layers):
        patch_block(loaded, pair, layer)
    return first, time.perf_counter() - started


def unbatched_cell_seconds(loaded, clean_run, corrupted: str, n_cells: int) -> float:
    """Seconds per cell of the plain sweep: one full forward of the corrupted prompt per cell, hooked to write one
    clean value, over ``n_cells`` cells spread over the blocks, sites and positions."""
    ids = torch.tensor([loaded.tokenizer.encode(corrupted, add_special_tokens=False)])
    seq = ids.shape[1]
    cells = [(site, layer, position) for layer in range(loaded.n_layers) for site in PATCHED_SITES
             for position in range(seq)]
    chosen = cells[:: max(1, len(cells) // n_cells)][:n_cells]
    started = time.perf_counter()
    for site, layer, position in chosen:
        clean = torch.from_numpy(clean_run[full_name(site, layer)][position])

        def patch(output, position=position, clean=clean):
            output = output.clone()
            output[0, position] = clean.to(output.dtype)
            return output
        role, _ = loaded.family.value_reads()[site]
        handle = loaded.module(role, layer).register_forward_hook(changed_output_hook(patch))
        with loaded.computing():
            loaded.model(input_ids=ids, use_cache=False, logits_to_keep=1)
        handle.remove()
    return (time.perf_counter() - started) / len(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sweep-cells", type=int, default=24)
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16-matmuls", "float32"])
    parser.add_argument("--corrupted", default=CORRUPTED, help="the corrupted prompt, as many tokens as the clean one")
    arguments = parser.parse_args()
    models = {dtype: load_model(MODEL, dtype=dtype) for dtype in arguments.dtypes}
    some = next(iter(models.values()))
    clean, corrupted = CLEAN, arguments.corrupted
    n_tokens = len(some.tokenizer.encode(clean, add_special_tokens=False))
    print(f"{MODEL}, {some.n_layers} blocks, torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.1f}")
    print(f"clean {clean!r}, corrupted {corrupted!r}, {n_tokens} tokens, "
          f"{3 * some.n_layers * n_tokens} patched runs")
    runs = {dtype: capture_token_ids(loaded, loaded.tokenizer.encode(clean, add_special_tokens=False), prompt=clean)
            for dtype, loaded in models.items()}
    firsts, totals, cells = ({dtype: [] for dtype in models} for _ in range(3))
    for dtype, loaded in models.items():  # warm-up, and the two exactness checks in this precision
        patching = patching_of(loaded, pair_with_run(loaded, runs[dtype], corrupted))
        print(f"{dtype:>17}: every position patched -> clean to {patching.clean_check:.1e}, nothing patched -> "
              f"corrupted to {patching.corrupted_check:.1e}; clean {patching.pair.clean_metric:.3f}, corrupted "
              f"{patching.pair.corrupted_metric:.3f} ({patching.pair.answer!r} - {patching.pair.wrong!r})")
    for _ in range(arguments.repeats):
        for dtype, loaded in models.items():
            first, total = batched(loaded, runs[dtype], corrupted)
            firsts[dtype].append(first)
            totals[dtype].append(total)
            cells[dtype].append(unbatched_cell_seconds(loaded, runs[dtype], corrupted, arguments.sweep_cells))
    n_cells = 3 * some.n_layers * n_tokens
    for dtype in models:
        first, total = statistics.median(firsts[dtype]), statistics.median(totals[dtype])
        sweep = statistics.median(cells[dtype]) * n_cells
        print(f"{dtype:>17}: all three grids {total:.2f} s (target {TARGET_SECONDS:g} s, "
              f"{'met' if total <= TARGET_SECONDS else 'missed'}), first row {first:.2f} s (target "
              f"{FIRST_ROW_TARGET_SECONDS:g} s, {'met' if first <= FIRST_ROW_TARGET_SECONDS else 'missed'}); "
              f"unbatched sweep {sweep:.1f} s ({arguments.sweep_cells} cells timed, times {n_cells}), "
              f"{sweep / total:.0f}x the batched; spread of the batched {min(totals[dtype]):.2f}-"
              f"{max(totals[dtype]):.2f} s")
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
