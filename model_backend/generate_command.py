"""``python -m model_backend generate``: write a continuation of a prompt, greedy or sampled, steered or not, and
save its tokens and each step's probabilities to an NPZ file (no pickles: strings are numpy unicode arrays)."""

from __future__ import annotations

import argparse

import numpy as np

from .compute import DTYPE_NAMES
from .errors import PromptError
from .export import write_arrays
from .generation import Generation, WriteSettings, generate_tokens
from .loaded_model import LoadedModel
from .loading import load_model
from .steering import Steering, steering_for
from .tokens import encode_prompt, sequence_strings

STEERING_OPTIONS = ("steer_block", "steer_toward", "steer_away", "steer_alpha")


def add_generate_arguments(commands, model_help: str) -> None:
    """The ``generate`` command's arguments, on the CLI's subparsers."""
    generate = commands.add_parser("generate", help="write a continuation of a prompt (greedy unless --temperature), "
                                                    "optionally steered, and save its steps to an NPZ file")
    generate.add_argument("--model", required=True, help=model_help)
    generate.add_argument("--prompt", required=True, help="the text to continue")
    generate.add_argument("--bos", action="store_true", help="put the model's BOS token first (in the steering "
                                                             "texts too)")
    generate.add_argument("--max-new-tokens", type=int, required=True, help="tokens to write at most (an EOS "
                                                                            "token stops sooner)")
    generate.add_argument("--temperature", type=float, help="sample at this temperature (default: greedy)")
    generate.add_argument("--top-k", type=int, help="sample among the k likeliest tokens only")
    generate.add_argument("--top-p", type=float, help="sample within the smallest set of probability >= p only")
    generate.add_argument("--seed", type=int, default=0, help="the sampling seed: one seed, one continuation")
    generate.add_argument("--steer-block", type=int, help="steer: the block whose input is shifted")
    generate.add_argument("--steer-toward", help="steer: the text to steer toward")
    generate.add_argument("--steer-away", help="steer: the text to steer away from")
    generate.add_argument("--steer-alpha", type=float, help="steer: the shift's scale")
    generate.add_argument("--dtype", choices=DTYPE_NAMES, default="float32", help="how the model computes")
    generate.add_argument("--out", required=True, help="the .npz file to write")


def generate(arguments: argparse.Namespace) -> str:
    settings = WriteSettings(max_new_tokens=arguments.max_new_tokens, temperature=arguments.temperature,
                             top_k=arguments.top_k, top_p=arguments.top_p, seed=arguments.seed)
    steering = requested_steering(arguments)
    loaded = load_model(arguments.model, dtype=arguments.dtype)
    prompt_ids = encode_prompt(loaded, arguments.prompt, bos=arguments.bos)
    vector = None if steering is None else steering_for(loaded, steering, bos=arguments.bos)
    generation = generate_tokens(loaded, prompt_ids, settings, vector)
    write_arrays(generation_arrays(loaded, generation, arguments.prompt, arguments.bos), arguments.out)
    how = "greedy" if settings.greedy else f"sampled at temperature {settings.temperature:g}, seed {settings.seed}"
    if vector is not None:
        how += f", block {vector.block} steered toward {vector.toward!r} away from {vector.away!r} × {vector.alpha:g}"
    continuation = loaded.tokenizer.decode(generation.generated_ids.tolist())
    return (f"wrote {arguments.out}: {len(generation.generated_ids)} new tokens of {loaded.display_name} ({how}): "
            f"{continuation!r}")


def requested_steering(arguments: argparse.Namespace) -> Steering | None:
    """The steering the four --steer options ask for: all of them, or none."""
    given = [getattr(arguments, option) is not None for option in STEERING_OPTIONS]
    if not any(given):
        return None
    if not all(given):
        missing = [f"--{option.replace('_', '-')}" for option, is_given in zip(STEERING_OPTIONS, given)
                   if not is_given]
        raise PromptError(f"steering needs all four --steer options; missing {', '.join(missing)}")
    return Steering(block=arguments.steer_block, toward=arguments.steer_toward, away=arguments.steer_away,
                    alpha=arguments.steer_alpha)


def generation_arrays(loaded: LoadedModel, generation: Generation, prompt: str, bos: bool):
    """Yield (key, array) for every entry of a generation's NPZ, in a stable order."""
    settings, steps = generation.settings, generation.steps
    yield "model", np.array(loaded.display_name, dtype=np.str_)
    yield "prompt", np.array(prompt, dtype=np.str_)
    yield "bos", np.array(bos)
    yield "prompt_ids", generation.prompt_ids
    yield "generated_ids", generation.generated_ids
    yield "token_ids", generation.token_ids
    yield "tokens", np.array(sequence_strings(loaded, generation.token_ids.tolist()), dtype=np.str_)
    yield "continuation", np.array(loaded.tokenizer.decode(generation.generated_ids.tolist()), dtype=np.str_)
    yield "step_probabilities", np.array([step.probability for step in steps], dtype=np.float32)
    yield "step_top_ids", np.stack([step.top_ids for step in steps]).astype(np.int64)
    yield "step_top_probs", np.stack([step.top_probs for step in steps]).astype(np.float32)
    yield "max_new_tokens", np.int64(settings.max_new_tokens)
    yield "temperature", np.float64(np.nan if settings.temperature is None else settings.temperature)  # nan: greedy
    yield "top_k", np.int64(settings.top_k or 0)  # 0: no top-k
    yield "top_p", np.float64(1.0 if settings.top_p is None else settings.top_p)  # 1: the whole distribution
    yield "seed", np.int64(settings.seed)
    steering = generation.steering
    if steering is not None:
        yield "steering.vector", steering.vector.astype(np.float32)
        yield "steering.block", np.int64(steering.block)
        yield "steering.alpha", np.float64(steering.alpha)
        yield "steering.toward", np.array(steering.toward, dtype=np.str_)
        yield "steering.away", np.array(steering.away, dtype=np.str_)
