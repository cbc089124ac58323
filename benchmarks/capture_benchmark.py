"""Benchmark: the full capture against a plain forward and transformers' own output flags, side by side.

Model: a GPT-2-small-shaped random model (12 x 768, GPT-2's real tokenizer); random weights cost the same compute
as pretrained ones. ``--shape llama-1b`` measures instead a random-init Llama of 16 blocks x 2048 (32 query heads,
8 key/value heads, 1.18 B parameters with GPT-2's vocabulary), built in the measuring process (no checkpoint on
disk, no load probe), one call per method, and prints the peak next to the model's own size. Prompts of 32, 256
and 1024 tokens, torch on 2 threads. Time is the median of several calls
after a warm-up, as a ratio to the plain forward in the page's own compute (``plain_forward.py``), the methods taking
turns in one process, each computing the logits at the last position only, as the capture does; the float32 plain
forward is a row of its own, for reference. Memory is the
resident-set growth sampled during one call, each in a fresh process started with MALLOC_MMAP_THRESHOLD_=65536 so
freed memory cannot hide the peak.

    python benchmarks/capture_benchmark.py [--lengths 32 256 1024] [--repeats 5]
    python benchmarks/capture_benchmark.py --shape llama-1b --lengths 2048

``--cast-once`` measures instead what the bfloat16 copies of the blocks' weights (``model_backend/matmul_weights.py``)
save: the plain forward of a real model (default SmolLM2-135M-Instruct) at each length and batch size, in float32,
with bfloat16 matmuls by autocast alone (every weight cast again each pass), and with the copies kept, the three
taking turns call by call in one process; it also checks that the last two give the same logits bit for bit.

    python benchmarks/capture_benchmark.py --cast-once --lengths 8 32 128 512 --batches 1 8 [--threads 2]
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
METHODS = ("plain forward", "transformers output flags", "full capture", "float32 plain forward")
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
    """A no-argument function that runs ``method`` once in the model's compute and returns what it keeps (an
    accelerator's queued work done). Every method computes the logits at the last position only, as the capture
    does."""
    from model_backend import capture_token_ids

    tensor = torch.tensor([ids], device=loaded.model.device)

    def call():
        with loaded.computing():
            if method in ("plain forward", "float32 plain forward"):
                kept = loaded.model(input_ids=tensor, use_cache=False, logits_to_keep=1)
            elif method == "transformers output flags":
                kept = loaded.model(input_ids=tensor, use_cache=False, logits_to_keep=1, output_hidden_states=True,
                                    output_attentions=True)
            else:
                kept = capture_token_ids(loaded, ids)
        if loaded.model.device.type == "cuda":
            torch.cuda.synchronize()
        return kept
    return call


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


def median_times(folder: str, length: int, repeats: int, device: str) -> dict[str, float]:
    """Median seconds per method, the methods taking turns call by call so that drift in the machine's speed
    touches them all alike: in the page's compute on ``device``, and the plain forward in float32 for reference."""
    from plain_forward import page_compute

    from model_backend import load_model

    loaded = load_model(folder, **page_compute(device))
    float32 = loaded if loaded.dtype == "float32" else load_model(folder, device=device)
    calls = {method: call_for(method, float32 if method.startswith("float32") else loaded, prompt_ids(length))
             for method in METHODS}
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
    from plain_forward import page_compute

    from model_backend import load_model

    torch.set_num_threads(2)
    loaded = load_model(folder, **({"dtype": "float32"} if method.startswith("float32") else page_compute("cpu")))
    with torch.inference_mode():
        call_for(method, loaded, prompt_ids(16))()
        mib, _ = peak_rss_growth(call_for(method, loaded, prompt_ids(length)))
    return mib


def llama_1b_shaped():
    """A random-init Llama 16 x 2048 ready for capture, made in this process, and its size in MiB."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from model_backend.families import family_for
    from model_backend.loaded_model import LoadedModel

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=50257, max_position_embeddings=4096,
                         tie_word_embeddings=False, attn_implementation="eager")
    model = LlamaForCausalLM(config).eval()
    tokenizer = AutoTokenizer.from_pretrained(REPO / "assets" / "gpt2-tokenizer")
    size = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    return LoadedModel("llama-1b-shaped", "local folder", model, tokenizer, family_for(config)), size


def llama_1b_row(method: str, length: int) -> tuple[float, float, float]:
    """Seconds and peak resident-set growth (MiB) of one call on the 1B Llama shape, and the model's size (MiB)."""
    torch.set_num_threads(2)
    loaded, size = llama_1b_shaped()
    with torch.inference_mode():
        call_for(method, loaded, prompt_ids(16))()
        started = time.perf_counter()
        mib, _ = peak_rss_growth(call_for(method, loaded, prompt_ids(length)))
    return time.perf_counter() - started, mib, size


def peak_memory_in_fresh_process(folder: Path, method: str, length: int) -> float:
    environment = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "2"}
    command = [sys.executable, __file__, "--measure-memory", json.dumps([str(folder), method, length])]
    output = subprocess.run(command, env=environment, capture_output=True, text=True, check=True).stdout
    return float(output.strip().splitlines()[-1])


def autocast_alone(loaded):
    """The model as the bfloat16-matmul mode computed before its weights were copied: float32 weights that autocast
    casts at every matmul, the readout in float32."""
    from dataclasses import replace

    from model_backend.loading import readout_in_float32

    readout_in_float32(loaded.model, loaded.module("lm_head"))
    return replace(loaded, matmul_dtype=torch.bfloat16)


def cast_once_rows(source: str, lengths: list[int], batches: list[int], repeats: int) -> None:
    """Median seconds of the plain forward per length and batch size in float32, autocast alone and with the
    copies kept (one model object each, taking turns call by call)."""
    from model_backend import load_model

    models = {"float32": load_model(source), "autocast alone": autocast_alone(load_model(source)),
              "bfloat16 copies kept": load_model(source, dtype="bfloat16-matmuls")}
    vocabulary = models["float32"].config.vocab_size
    print(f"{source}, torch {torch.__version__}, {torch.get_num_threads()} threads, median of {repeats} "
          "interleaved calls after a warm-up")
    print(f"{'tokens':>6} {'batch':>5}  " + "".join(f"{name:>22}" for name in models) + f"{'autocast/kept':>15}")
    generator = torch.Generator().manual_seed(0)
    for length in lengths:
        for batch in batches:
            ids = torch.randint(vocabulary, (batch, length), generator=generator)
            seconds = {name: [] for name in models}
            logits = {}
            for turn in range(repeats + 1):
                for name, loaded in models.items():
                    with loaded.computing():
                        started = time.perf_counter()
                        logits[name] = loaded.model(input_ids=ids, use_cache=False, logits_to_keep=1).logits
                        if turn:
                            seconds[name].append(time.perf_counter() - started)
            if not torch.equal(logits["autocast alone"], logits["bfloat16 copies kept"]):
                raise AssertionError("the kept copies changed the logits")
            median = {name: statistics.median(values) for name, values in seconds.items()}
            print(f"{length:>6} {batch:>5}  " + "".join(f"{median[name]:>21.3f}s" for name in models)
                  + f"{median['autocast alone'] / median['bfloat16 copies kept']:>14.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 256, 1024])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shape", choices=("gpt2-small", "llama-1b"), default="gpt2-small")
    parser.add_argument("--cast-once", action="store_true", help="measure the bfloat16 copies of the weights")
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct", help="with --cast-once")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8], help="with --cast-once")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (on cuda no memory column)")
    parser.add_argument("--measure-memory", help=argparse.SUPPRESS)
    parser.add_argument("--measure-llama", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.measure_memory:
        print(peak_memory_here(*json.loads(arguments.measure_memory)))
        return
    if arguments.measure_llama:
        print(json.dumps(llama_1b_row(*json.loads(arguments.measure_llama))))
        return
    torch.set_num_threads(arguments.threads)
    if arguments.cast_once:
        cast_once_rows(arguments.model, arguments.lengths, arguments.batches, arguments.repeats)
        return
    if arguments.shape == "llama-1b":
        print_llama_1b_rows(arguments.lengths)
        return
    with tempfile.TemporaryDirectory() as folder:
        save_gpt2_small_shaped(Path(folder))
        from plain_forward import page_compute

        print(f"GPT-2-small-shaped random model, torch {torch.__version__}, {arguments.threads} threads, "
              f"{page_compute(arguments.device)} as the page computes (eager attention), median of "
              f"{arguments.repeats} interleaved calls after a warm-up; memory: RSS growth in a fresh process")
        print(f"{'tokens':>6}  {'method':<27} {'time':>8} {'vs plain':>9} {'peak extra':>11}")
        for length in arguments.lengths:
            times = median_times(folder, length, arguments.repeats, arguments.device)
            for method in METHODS:
                mib = (f"{peak_memory_in_fresh_process(Path(folder), method, length):>8.0f} MiB"
                       if arguments.device == "cpu" else "")
                ratio = times[method] / times["plain forward"]
                print(f"{length:>6}  {method:<27} {times[method]:>7.3f}s {ratio:>8.2f}x {mib}", flush=True)


def print_llama_1b_rows(lengths: list[int]) -> None:
    """One call per method and length on the 1B Llama shape, each in a fresh process, with the peak against twice
    the model's size (the bound past which attention patterns would have to be read on demand)."""
    environment = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "2"}
    print(f"Llama 16 x 2048 random-init, torch {torch.__version__}, 2 threads, one call after a warm-up, "
          "each in a fresh process; memory: RSS growth during the call")
    print(f"{'tokens':>6}  {'method':<27} {'time':>8} {'peak extra':>11} {'vs model size':>14}")
    for length in lengths:
        for method in ("plain forward", "full capture"):
            command = [sys.executable, __file__, "--measure-llama", json.dumps([method, length])]
            output = subprocess.run(command, env=environment, capture_output=True, text=True, check=True).stdout
            seconds, mib, size = json.loads(output.strip().splitlines()[-1])
            print(f"{length:>6}  {method:<27} {seconds:>7.1f}s {mib:>7.0f} MiB {mib / size:>9.2f}x of "
                  f"{size:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
