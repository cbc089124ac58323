"""Generation benchmark: the project's decoder (``model_backend.generation``, one cached step per call) beside
transformers' ``generate`` on the same model, in the page's own precision, greedy, with the same DynamicCache.

The two take turns in one process, a warm-up each first; each median is over --repeats writes of --new-tokens tokens
after the prompt (BOS first), and the ratio is the decoder's median over generate's (the target: ``TARGET_RATIO``).
``--steered`` times the decoder steered at block 10 too (its hook is registered and removed at every step).

    python benchmarks/generation_benchmark.py [--model HuggingFaceTB/SmolLM2-135M-Instruct] [--new-tokens 32]
        [--repeats 5] [--threads 2] [--steered]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from plain_forward import page_compute, synchronize

from model_backend import load_model
from model_backend.generation import WriteSettings, generate_tokens
from model_backend.model_names import SMOLLM2
from model_backend.steering import Steering, steering_for
from model_backend.tokens import encode_prompt

PROMPT = "The capital of France is"
TARGET_RATIO = 1.2  # the decoder's median over generate's, at most


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=SMOLLM2)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steered", action="store_true")
    arguments = parser.parse_args()
    torch.set_num_threads(arguments.threads)
    loaded = load_model(arguments.model, **page_compute(arguments.device))
    prompt_ids = encode_prompt(loaded, PROMPT, bos=True)
    settings = WriteSettings(max_new_tokens=arguments.new_tokens)
    input_ids = torch.tensor([prompt_ids], device=loaded.model.device)
    eos = loaded.model.generation_config.eos_token_id

    def ours() -> None:
        generation = generate_tokens(loaded, prompt_ids, settings)
        synchronize(loaded)
        written.append(generation.generated_ids.tolist())

    def theirs() -> None:
        with loaded.computing():  # the page's precision: autocast where it runs bfloat16 matmuls
            output = loaded.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                                           max_new_tokens=arguments.new_tokens, pad_token_id=eos)
        synchronize(loaded)
        written.append(output[0, len(prompt_ids):].tolist())

    calls = {"decoder": ours, "generate": theirs}
    if arguments.steered:
        vector = steering_for(loaded, Steering(block=min(10, loaded.n_layers - 1), toward=" Italy", away=" France",
                                               alpha=1.0), bos=True)
        calls["decoder, steered"] = lambda: written.append(generate_tokens(loaded, prompt_ids, settings, vector)
                                                           .generated_ids.tolist())
    times = {name: [] for name in calls}
    written: list[list[int]] = []
    for name, call in calls.items():  # warm-up
        call()
    for _ in range(arguments.repeats):
        for name, call in calls.items():
            written.clear()
            times[name].append(timed(call))
    medians = {name: statistics.median(values) for name, values in times.items()}
    same = generate_tokens(loaded, prompt_ids, settings).generated_ids.tolist()
    written.clear()
    theirs()
    print(f"{loaded.display_name}, {loaded.compute}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"{len(prompt_ids)}-token prompt, {arguments.new_tokens} new tokens greedy, median of {arguments.repeats}")
    for name, median in medians.items():
        print(f"  {name:18s} {median:7.3f} s  ({1000 * median / arguments.new_tokens:6.1f} ms/token)")
    print(f"  ratio decoder / generate: {medians['decoder'] / medians['generate']:.3f} (target <= {TARGET_RATIO}); "
          f"same tokens: {same == written[0]}")


if __name__ == "__main__":
    main()
