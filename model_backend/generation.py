"""Watching the model write: greedy or sampled decoding, one cached step per call, exact against ``generate``.

A ``Decoder`` runs one forward pass per ``step()``: the prompt with a fresh ``DynamicCache`` first, then each new
token alone against the cache, as transformers' ``generate`` does. A server can run each step as a job of its own on
the model's thread and interleave sessions; between steps the decoder holds no hook, only its cache. Sampling
follows transformers' warpers (temperature, then top-k, then top-p) and draws from a ``torch.Generator`` seeded with
the settings' seed, so one seed replays one continuation.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import DynamicCache

from .capture import capture_token_ids
from .errors import PromptError
from .loaded_model import LoadedModel
from .run import Run
from .steered_pass import SteeringVector, steered
from .tokens import check_fits

STEP_TOP_K = 5  # alternatives kept per step


@dataclass(frozen=True)
class WriteSettings:
    """How to write: how many tokens at most, and greedy (``temperature`` None) or sampled with a seed."""

    max_new_tokens: int = 16
    temperature: float | None = None  # None: greedy, the argmax of the logits
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """Refuse settings no decoding can follow, saying which and why."""
        if not is_integer(self.max_new_tokens) or self.max_new_tokens < 1:
            raise PromptError(f"max_new_tokens must be a whole number of at least 1, not {self.max_new_tokens!r}")
        if self.temperature is not None and not (is_number(self.temperature) and math.isfinite(self.temperature)
                                                 and self.temperature > 0):
            raise PromptError(f"temperature must be a finite number above 0 (or none, for greedy decoding), not "
                              f"{self.temperature!r}")
        if self.top_k is not None and (not is_integer(self.top_k) or self.top_k < 1):
            raise PromptError(f"top_k must be a whole number of at least 1 (or none), not {self.top_k!r}")
        if self.top_p is not None and not (is_number(self.top_p) and 0 < self.top_p <= 1):
            raise PromptError(f"top_p must be a number in (0, 1] (or none), not {self.top_p!r}")
        if not is_integer(self.seed):
            raise PromptError(f"seed must be a whole number, not {self.seed!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature is None


def is_integer(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def check_room(loaded: LoadedModel, n_prompt_tokens: int, max_new_tokens: int) -> None:
    """Refuse a prompt whose new tokens would run past the model's positions (the final capture reads them all)."""
    check_fits(loaded, n_prompt_tokens)
    if n_prompt_tokens + max_new_tokens > loaded.max_positions:
        raise PromptError(f"the prompt is {n_prompt_tokens} tokens long and {max_new_tokens} more were asked for, but "
                          f"{loaded.display_name} reads at most {loaded.max_positions} positions: ask for at most "
                          f"{max(loaded.max_positions - n_prompt_tokens, 0)} new tokens, or shorten the prompt")


@dataclass(frozen=True)
class DecodeStep:
    """One written token, with the model's own probabilities (softmax of the unprocessed logits, temperature 1)."""

    token_id: int
    probability: float  # the chosen token's
    top_ids: np.ndarray  # [5] the likeliest tokens at this step, likeliest first
    top_probs: np.ndarray  # [5] their probabilities


def eos_token_ids(loaded: LoadedModel) -> frozenset[int]:
    """The tokens that end a continuation, as ``generate`` reads them: the generation config's, else the config's."""
    eos = getattr(loaded.model.generation_config, "eos_token_id", None)
    if eos is None:
        eos = getattr(loaded.config, "eos_token_id", None)
    return frozenset() if eos is None else frozenset([eos] if isinstance(eos, int) else eos)


class Decoder:
    """Decodes one token per ``step()`` from a cache it keeps; ``done`` after ``max_new_tokens`` or an EOS token."""

    def __init__(self, loaded: LoadedModel, prompt_ids: list[int], settings: WriteSettings,
                 steering: SteeringVector | None = None):
        check_room(loaded, len(prompt_ids), settings.max_new_tokens)
        self.loaded, self.settings, self.steering = loaded, settings, steering
        self.prompt_ids = [int(token) for token in prompt_ids]
        self.steps: list[DecodeStep] = []
        self.cache = None
        self.eos = eos_token_ids(loaded)
        device = loaded.model.device
        self.generator = torch.Generator(device=device).manual_seed(settings.seed)
        # transformers 5 renamed past_key_values to cache; a forward takes the name it has
        parameters = inspect.signature(loaded.model.forward).parameters
        self.cache_keyword = "cache" if "cache" in parameters else "past_key_values"

    @property
    def generated_ids(self) -> list[int]:
        return [step.token_id for step in self.steps]

    @property
    def done(self) -> bool:
        return len(self.steps) >= self.settings.max_new_tokens or bool(self.steps and self.steps[-1].token_id
                                                                         in self.eos)

    def step(self) -> DecodeStep:
        """Run one pass (the prompt's the first time, then the last token's against the cache) and choose a token;
        the steering hook, if any, is registered for this pass alone."""
        if self.done:
            raise RuntimeError("the decoder is done: it wrote every token it was asked for, or an EOS token")
        loaded = self.loaded
        if self.cache is None:
            self.cache = DynamicCache(config=loaded.config.get_text_config(decoder=True))
            new_ids, start = self.prompt_ids, 0
        else:
            new_ids, start = [self.steps[-1].token_id], len(self.prompt_ids) + len(self.steps) - 1
        device = loaded.model.device
        with loaded.computing(), steered(loaded, self.steering):
            output = loaded.model(
                input_ids=torch.tensor([new_ids], device=device),
                position_ids=torch.arange(start, start + len(new_ids), device=device)[None],
                use_cache=True, logits_to_keep=1, **{self.cache_keyword: self.cache})
            logits = output.logits[0, -1].to(copy=True, dtype=torch.float32)
            del output
            token_id = choose(logits, self.settings, self.generator)
            step = described_step(logits, token_id)
        self.steps.append(step)
        return step


def start_decoding(loaded: LoadedModel, prompt_ids: list[int], settings: WriteSettings,
                   steering: SteeringVector | None = None) -> Decoder:
    """A decoder for ``prompt_ids``: nothing runs until its first ``step()``."""
    return Decoder(loaded, prompt_ids, settings, steering)


def processed_scores(logits: torch.Tensor, settings: WriteSettings) -> torch.Tensor:
    """The logits as transformers' warpers leave them: divided by the temperature, then all but the top k, then all
    outside the top-p nucleus set to -inf (ties at the k-th logit are kept, and so is the likeliest token)."""
    scores = logits / settings.temperature if settings.temperature != 1.0 else logits
    if settings.top_k is not None:
        kth = torch.topk(scores, min(settings.top_k, scores.shape[-1]))[0][..., -1, None]
        scores = scores.masked_fill(scores < kth, -math.inf)
    if settings.top_p is not None and settings.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False)
        outside = sorted_scores.softmax(dim=-1).cumsum(dim=-1) <= (1 - settings.top_p)
        outside[..., -1:] = False
        scores = scores.masked_fill(outside.scatter(-1, order, outside), -math.inf)
    return scores


def choose(logits: torch.Tensor, settings: WriteSettings, generator: torch.Generator) -> int:
    """The next token: the argmax (greedy), or one drawn from the processed distribution with ``generator``."""
    if settings.greedy:
        return int(torch.argmax(logits, dim=-1))
    probabilities = processed_scores(logits[None], settings).softmax(dim=-1)
    return int(torch.multinomial(probabilities, num_samples=1, generator=generator)[0, 0])


def described_step(logits: torch.Tensor, token_id: int) -> DecodeStep:
    """The step's token with the model's own probabilities: softmax of the unprocessed logits."""
    probabilities = logits.softmax(dim=-1)
    top = probabilities.topk(min(STEP_TOP_K, probabilities.shape[-1]))
    return DecodeStep(token_id=token_id, probability=float(probabilities[token_id]),
                      top_ids=top.indices.cpu().numpy().astype(np.int64), top_probs=top.values.cpu().numpy())


@dataclass(frozen=True)
class Generation:
    """A prompt and what the model wrote after it, step by step."""

    prompt_ids: np.ndarray  # [prompt] int64
    generated_ids: np.ndarray  # [new] int64
    steps: list[DecodeStep] = field(repr=False)
    settings: WriteSettings
    steering: SteeringVector | None = None

    @property
    def token_ids(self) -> np.ndarray:
        """The prompt and the written tokens, as one sequence."""
        return np.concatenate([self.prompt_ids, self.generated_ids])

    @property
    def generated_from(self) -> int:
        """The position of the first written token."""
        return len(self.prompt_ids)


def generate_tokens(loaded: LoadedModel, prompt_ids: list[int], settings: WriteSettings,
                    steering: SteeringVector | None = None) -> Generation:
    """Decode to the end in one call: ``start_decoding``'s steps until it is done."""
    decoder = start_decoding(loaded, prompt_ids, settings, steering)
    while not decoder.done:
        decoder.step()
    return generation_of(decoder)


def generation_of(decoder: Decoder) -> Generation:
    """What a decoder has written so far, as a Generation."""
    return Generation(prompt_ids=np.asarray(decoder.prompt_ids, dtype=np.int64),
                      generated_ids=np.asarray(decoder.generated_ids, dtype=np.int64), steps=list(decoder.steps),
                      settings=decoder.settings, steering=decoder.steering)


def capture_generation(loaded: LoadedModel, generation: Generation, *, prompt: str = "", bos: bool = False) -> Run:
    """One capture of the prompt and every written token, steered as the writing was; the Run knows where the
    written positions start (``generated_from``)."""
    return capture_token_ids(loaded, generation.token_ids.tolist(), prompt=prompt, bos=bos,
                             steering=generation.steering, generated_from=generation.generated_from)
