"""A pass in the server's wide model thread, against the same pass in the main thread and in a model thread of a
process where a second thread has computed on several cores (``viz_app/model_work.py`` says why that matters).

Each case runs in a fresh process (OpenMP's teams last as long as the process): SmolLM2-135M-Instruct (or --model)
loaded as the page loads it, the plain forward and the page's capture of a --tokens prompt, medians of --repeats
after a warm-up, with the cores the process's threads used meanwhile.

    python benchmarks/model_thread_forward.py [--model NAME] [--tokens 128] [--repeats 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time

import torch
from plain_forward import page_compute

CASES = {
    "main thread": "the main thread alone computes, on every core",
    "wide model thread": "the main thread on one core, the pass in the wide model thread (the server's way)",
    "model thread, two teams": "the main thread computed on every core first, then the pass in a model thread",
}


def timed(step, repeats: int) -> dict:
    """Median seconds of ``step()`` and the cores the process used over the repeats."""
    step()
    seconds, used_before, started = [], resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(repeats):
        began = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - began)
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = used.ru_utime - used_before.ru_utime + used.ru_stime - used_before.ru_stime
    return {"seconds": statistics.median(seconds), "cores": cpu / (time.perf_counter() - started)}


def measure_case(case: str, model: str, tokens: int, repeats: int) -> dict:
    """The plain forward and the capture, timed as ``case`` describes (in this process)."""
    from model_backend import capture_batch, load_model
    from viz_app import model_work

    if case != "main thread":
        model_work.compute_on_one_core_in_this_thread()
    if case == "model thread, two teams":
        torch.set_num_threads(model_work.ALL_CORES)
        torch.randn(512, 512) @ torch.randn(512, 512)
    loaded = load_model(model, **page_compute())
    ids = [loaded.tokenizer.bos_token_id or 0, *range(1000, 999 + tokens)]

    def forward():
        with loaded.computing():
            loaded.model(input_ids=torch.tensor([ids]), use_cache=False)

    def both() -> dict:
        return {"plain forward": timed(forward, repeats),
                "capture": timed(lambda: capture_batch(loaded, [ids], prompts=["…"], bos=[True]), repeats)}

    if case == "main thread":
        return both()
    return asyncio.run(model_work.in_model_thread(both))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--case", choices=sorted(CASES), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.case:
        print(json.dumps(measure_case(arguments.case, arguments.model, arguments.tokens, arguments.repeats)))
        return
    print(f"{arguments.model}, {arguments.tokens} tokens, {torch.get_num_threads()} cores, "
          f"median of {arguments.repeats}")
    for case, meaning in CASES.items():
        result = subprocess.run([sys.executable, __file__, "--case", case, "--model", arguments.model, "--tokens",
                                 str(arguments.tokens), "--repeats", str(arguments.repeats)],
                                capture_output=True, text=True, check=True)
        figures = json.loads(result.stdout.strip().splitlines()[-1])
        cells = "  ".join(f"{step} {value['seconds'] * 1000:6.1f} ms on {value['cores']:.2f} cores"
                          for step, value in figures.items())
        print(f"{case:<26} {cells}   ({meaning})")


if __name__ == "__main__":
    main()
