"""Benchmark: the full capture against a plain forward and transformers' own output flags, side by side.

Model: a GPT-2-small-shaped random model (12 x 768, GPT-2's real tokenizer); random weights cost the same compute
as pretrained ones. Prompts of 32, 256 and 1024 tokens, torch on 2 threads. Time is the median of several calls
after a warm-up, as a ratio to the plain forward, the three methods taking turns in one process. Memory is the
resident-set growth sampled during one call, each in a fresh process started with MALLOC_MMAP_THRESHOLD_=65536 so
freed memory cannot hide the peak.

    python benchmarks/capture_benchmark.py [--lengths 32 256 1024] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import torch

REPO = Path(__file__).resolve().parent.parent
METHODS = ("plain forward", "transformers output flags", "full capture")
SAMPLE_SECONDS = 0.002
TEXT = ("As Gregor Samsa awoke one morning from uneasy dreams, he found himself transformed in his bed into a "
        "gigantic insect. He was lying on his hard, as it were armour-plated, back and when he lifted his head a "
        "little he could see his dome-like brown belly divided into stiff arched segments. ")


def save_gpt2_small_shaped(folder: Path) -> None:
    """A random 12 x 768 GPT-2 with 1024 positions and GPT-2's tokenizer, saved for the measuring processes."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config()).save_pretrained(folder)
    AutoTokenizer.from_pretrained(REPO / "assets" / "gpt2-tokenizer").save_pretrained(folder)


def prompt_ids(length: int) -> list[int]:
    """``length`` token ids of ordinary text, BOS first."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(REPO / "assets" / "gpt2-tokenizer")
    ids = tokenizer.encode(TEXT * (1 + length // 40))
    return [tokenizer.bos_token_id, *ids[: length - 1]]


def call_for(method: str, loaded, ids: list[int]):
    """A no-argument function that runs ``method`` once and returns what it keeps."""
    from model_backend import capture_token_ids

    tensor = torch.tensor([ids])
    if method == "plain forward":
        return lambda: loaded.model(input_ids=tensor, use_cache=False)
    if method == "transformers output flags":
        return lambda: loaded.model(input_ids=tensor, use_cache=False, output_hidden_states=True,
                                    output_attentions=True)
    return lambda: capture_token_ids(loaded, ids)


def peak_rss_growth(function) -> tuple[float, object]:
    """Run ``function`` while a thread samples the resident set; return the peak growth in MiB and the result."""
    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = baseline
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, process.memory_info().rss)
            time.sleep(SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = function()
        peak = max(peak, process.memory_info().rss)
    finally:
        done.set()
        sampler.join()
    return (peak - baseline) / 2**20, result


def median_times(folder: str, length: int, repeats: int) -> dict[str, float]:
    """Median seconds per method, the methods taking turns call by call so that drift in the machine's speed
    touches them all alike."""
    from model_backend import load_model

    loaded = load_model(folder)
    calls = {method: call_for(method, loaded, prompt_ids(length)) for method in METHODS}
    seconds = {method: [] for method in METHODS}
    with torch.inference_mode():
        for call in calls.values():
            call()  # warm-up
        for _ in range(repeats):
            for method, call in calls.items():
                started = time.perf_counter()
                call()
                seconds[method].append(time.perf_counter() - started)
    return {method: statistics.median(values) for method, values in seconds.items()}


def peak_memory_here(folder: str, method: str, length: int) -> float:
    """Peak resident-set growth in MiB of one call, in this (fresh) process, after a short warm-up call."""
    from model_backend import load_model

    torch.set_num_threads(2)
    loaded = load_model(folder)
    with torch.inference_mode():
        call_for(method, loaded, prompt_ids(16))()
        mib, _ = peak_rss_growth(call_for(method, loaded, prompt_ids(length)))
    return mib


def peak_memory_in_fresh_process(folder: Path, method: str, length: int) -> float:
    environment = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "2"}
    command = [sys.executable, __file__, "--measure-memory", json.dumps([str(folder), method, length])]
    output = subprocess.run(command, env=environment, capture_output=True, text=True, check=True).stdout
    return float(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 256, 1024])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--measure-memory", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.measure_memory:
        print(peak_memory_here(*json.loads(arguments.measure_memory)))
        return
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as folder:
        save_gpt2_small_shaped(Path(folder))
        print(f"GPT-2-small-shaped random model, torch {torch.__version__}, 2 threads, "
              f"median of {arguments.repeats} interleaved calls after a warm-up; memory: RSS growth in a fresh process")
        print(f"{'tokens':>6}  {'method':<27} {'time':>8} {'vs plain':>9} {'peak extra':>11}")
        for length in arguments.lengths:
            times = median_times(folder, length, arguments.repeats)
            for method in METHODS:
                mib = peak_memory_in_fresh_process(Path(folder), method, length)
                ratio = times[method] / times["plain forward"]
                print(f"{length:>6}  {method:<27} {times[method]:>7.3f}s {ratio:>8.2f}x {mib:>8.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
