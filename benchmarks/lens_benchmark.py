"""Lens benchmark: the logit lens's backend read alone, as the page asks for it, without a server or a browser.

For a run of "word word …" (BOS first, --tokens long), loaded as the page loads it, medians of --repeats:
- the positions a run's lens grid opens on (the page reads them ahead after the run);
- the positions a drag to the first tokens shows (``shown_positions`` of the grid's first nine cells);
- how long a chunk read off screen, on one core as the page reads it, takes to stop once a drag asks for the
  threads (the drag's own read waits that long), asked at a random moment of the chunk's read.
``--against REF`` also times that git ref's ``model_backend/lens.py`` on the same positions, interleaved with this
tree's in one process: the backend's change alone (what the page reads first is ``viz_app/lens_reading.py``'s).

    python benchmarks/lens_benchmark.py --model google/gemma-3-270m [--tokens 128] [--repeats 3] [--against main]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
from plain_forward import page_compute

from layouts.logit_lens_view import VISIBLE_POSITIONS, shown_positions
from model_backend import capture_token_ids, lens, load_model
from model_backend.tokens import encode_prompt
from viz_app.lens_reading import LENS_CHUNK_POSITIONS, LENS_TOP_K, next_off_screen, unread_on_screen


def lens_module_at(ref: str, folder: Path):
    """``model_backend/lens.py`` as it was at git ref ``ref``, imported beside this tree's (its imports are this
    tree's ``model_backend``)."""
    source = subprocess.run(["git", "show", f"{ref}:model_backend/lens.py"], capture_output=True, text=True,
                            check=True, cwd=Path(__file__).resolve().parent).stdout
    path = folder / "lens_at_ref.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("model_backend.lens_at_ref", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def seconds_to_give_way(module, loaded, run, positions: np.ndarray, ask_after: float) -> float:
    """A chunk read off screen on one core; ``ask_after`` seconds in, a drag asks: seconds until the read returns."""
    asked_at: list[float] = []

    def read_off_screen() -> None:
        torch.set_num_threads(1)
        module.logit_lens(loaded, run, k=LENS_TOP_K, target_id=None, positions=positions,
                          keep_reading=lambda: not asked_at)

    reader = threading.Thread(target=read_off_screen)
    reader.start()
    time.sleep(ask_after)
    asked_at.append(time.perf_counter())
    reader.join()
    return time.perf_counter() - asked_at[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", help="a git ref whose model_backend/lens.py is timed too, interleaved")
    arguments = parser.parse_args()
    loaded = load_model(arguments.model, **page_compute())
    token_ids = encode_prompt(loaded, " ".join(["word"] * arguments.tokens), bos=True)[: arguments.tokens]
    run = capture_token_ids(loaded, token_ids, bos=True)
    unread = np.ones(run.seq_len, dtype=bool)
    opening = unread_on_screen(unread, None)
    dragged = unread_on_screen(unread, shown_positions(-0.5, VISIBLE_POSITIONS - 0.5, run.seq_len))
    unread[opening] = False
    off_screen = next_off_screen(unread, None)
    with tempfile.TemporaryDirectory() as folder:
        versions = {"this tree": lens}
        if arguments.against:
            versions[arguments.against] = lens_module_at(arguments.against, Path(folder))
        times = {(name, what): [] for name in versions for what in ("opening", "drag", "give way")}
        ask_after = np.random.default_rng(0).uniform(0.05, 0.5, arguments.repeats)
        for repeat in range(arguments.repeats):
            for name, module in versions.items():
                for what, positions in (("opening", opening), ("drag", dragged)):
                    started = time.perf_counter()
                    read = module.logit_lens(loaded, run, k=LENS_TOP_K, target_id=int(token_ids[-1]),
                                             positions=positions)
                    times[(name, what)].append(time.perf_counter() - started)
                    if read.last_row_max_abs_diff != 0.0:
                        raise AssertionError(f"{name}: the lens's last row differs from the logits")
                times[(name, "give way")].append(seconds_to_give_way(module, loaded, run, off_screen,
                                                                     ask_after[repeat]))
    print(f"{arguments.model}, {loaded.compute}, {torch.get_num_threads()} threads, {run.seq_len} tokens, median of "
          f"{arguments.repeats}; opening reads {len(opening)} positions, the drag {len(dragged)}, the chunk off screen "
          f"{len(off_screen)} (of at most {LENS_CHUNK_POSITIONS})")
    for (name, what), values in times.items():
        print(f"{name:<12} {what:<9} {statistics.median(values):7.3f}s   all: {' '.join(f'{v:.2f}' for v in values)}")


if __name__ == "__main__":
    main()
