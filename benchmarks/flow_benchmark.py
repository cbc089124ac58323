"""Benchmark: information flow's shares (``model_backend.flow``) against the plain forward in the same precision,
and the memory the computation takes.

Model: SmolLM2-135M-Instruct in float32 (``python -m model_backend prepare HuggingFaceTB/SmolLM2-135M-Instruct``
first), prompts of ``--lengths`` tokens cut from a repeated English text, torch on this machine's threads. For each
length: the median of ``--repeats`` runs of ``information_flow`` (after a warm-up) over a run already captured,
beside the median plain forward (``plain_forward.median_forward_seconds``). Then the peak resident memory above the
start of the call (sampled every 5 ms): of ``information_flow`` at ``--memory-lengths`` tokens where its share table
fits ``FLOW_MAX_BYTES``, else of ``--blocks`` blocks of ``layer_flow`` (how the CLI computes, one block at a time),
with the refusal the prompt gets.

    python benchmarks/flow_benchmark.py [--lengths 128 512] [--memory-lengths 512 2048] [--repeats 3] [--blocks 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model_backend import PromptError, load_model  # noqa: E402
from model_backend.capture import capture_token_ids  # noqa: E402
from model_backend.flow import information_flow, layer_flow  # noqa: E402
from plain_forward import median_forward_seconds  # noqa: E402

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
TEXT = ("The residual stream carries every token's state from block to block; each attention head reads the other "
        "positions and writes back into it, and each MLP rewrites one position at a time. ")


def token_ids(loaded, n_tokens: int) -> list[int]:
    """``n_tokens`` ids of the repeated text."""
    ids = loaded.tokenizer.encode(TEXT, add_special_tokens=False)
    return (ids * (n_tokens // len(ids) + 1))[:n_tokens]


def peak_rss_above_start(call) -> tuple[float, object]:
    """The call's result and the largest resident memory above its start, in MB, sampled every 5 ms."""
    process, peak, running = psutil.Process(), [0], [True]
    start = process.memory_info().rss

    def sample() -> None:
        while running[0]:
            peak[0] = max(peak[0], process.memory_info().rss - start)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = call()
    finally:
        running[0] = False
        sampler.join()
    return max(peak[0], process.memory_info().rss - start) / 1e6, result


def median_flow_seconds(loaded, run, repeats: int) -> float:
    times = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        information_flow(loaded, run)
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--memory-lengths", type=int, nargs="+", default=[512, 2048])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=2, help="blocks of layer_flow timed where the table is refused")
    arguments = parser.parse_args()
    loaded = load_model(MODEL)
    print(f"{loaded.display_name}: {loaded.n_layers} blocks, {loaded.n_heads} heads, {loaded.compute}, "
          f"{psutil.cpu_count()} CPUs")
    for n_tokens in arguments.lengths:
        ids = token_ids(loaded, n_tokens)
        run = capture_token_ids(loaded, ids)
        forward = median_forward_seconds(loaded, ids, arguments.repeats)
        flow = median_flow_seconds(loaded, run, arguments.repeats)
        checks = information_flow(loaded, run)
        print(f"{n_tokens:5d} tokens: information_flow {flow:8.2f} s · plain forward {forward:6.3f} s · "
              f"{flow / forward:6.0f}× · checks {checks.attention_check:.1e} (attention), {checks.mlp_check:.1e} "
              f"(MLP)")
    for n_tokens in arguments.memory_lengths:
        run = capture_token_ids(loaded, token_ids(loaded, n_tokens))
        try:
            peak, flow = peak_rss_above_start(lambda: information_flow(loaded, run))
            print(f"{n_tokens:5d} tokens: information_flow peak memory {peak:7.0f} MB above its start "
                  f"(share table {flow.attention_heads.nbytes / 1e6:.0f} MB)")
        except PromptError as refusal:
            print(f"{n_tokens:5d} tokens: information_flow refused: {refusal}")
            started = time.perf_counter()
            blocks = range(arguments.blocks)
            peak, _ = peak_rss_above_start(lambda: [layer_flow(loaded, run, layer) for layer in blocks])
            seconds = (time.perf_counter() - started) / arguments.blocks
            print(f"{n_tokens:5d} tokens: layer_flow (the CLI's path) peak memory {peak:7.0f} MB above its start over "
                  f"{arguments.blocks} blocks, {seconds:.1f} s a block (all {loaded.n_layers}: about "
                  f"{seconds * loaded.n_layers:.0f} s)")


if __name__ == "__main__":
    main()
