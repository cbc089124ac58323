"""Branches: several continuations of one prompt side by side, where they part, and a branch continued from one of
the alternatives at a step. Every branch is an ordinary ``Generation`` of the prompt, so it captures, steers and
replays like one written text."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .errors import PromptError
from .generation import (DecodeStep, Decoder, Generation, WriteSettings, eos_token_ids, generation_of,
                         start_decoding)
from .loaded_model import LoadedModel
from .steered_pass import SteeringVector

MAX_BRANCHES = 5


def branch_seeds(settings: WriteSettings, n_branches: int) -> list[int]:
    """One seed per branch: the settings' seed, then the next ones, so a link's seed names every branch."""
    if not 1 <= n_branches <= MAX_BRANCHES:
        raise PromptError(f"branches must be 1 to {MAX_BRANCHES}, not {n_branches}")
    return [settings.seed + index for index in range(n_branches)]


def start_branches(loaded: LoadedModel, prompt_ids: list[int], settings: WriteSettings, n_branches: int,
                   steering: SteeringVector | None = None) -> list[Decoder]:
    """A decoder per branch, each with its own seed; a caller steps them in turn so that they grow side by side."""
    return [start_decoding(loaded, prompt_ids, replace(settings, seed=seed), steering)
            for seed in branch_seeds(settings, n_branches)]


def parting_step(generations: list[Generation]) -> int | None:
    """The first written step at which the branches do not all write the same token (the shortest one's end when
    one stops early); None when they are all the same text."""
    texts = [generation.generated_ids.tolist() for generation in generations]
    for step in range(max(len(text) for text in texts)):
        if len({tuple(text[step:step + 1]) for text in texts}) > 1:
            return step
    return None


def forced_step(parent: Generation, step: int, token_id: int) -> DecodeStep:
    """The parent's step ``step`` with ``token_id`` chosen instead: the same distribution (the same prefix was
    read), so the same alternatives and that token's own probability among them."""
    original = parent.steps[step]
    listed = original.top_ids.tolist()
    if token_id not in listed:
        raise PromptError(f"token {token_id} is not among step {step + 1}'s alternatives")
    return replace(original, token_id=token_id, probability=float(original.top_probs[listed.index(token_id)]))


@dataclass(frozen=True)
class BranchStart:
    """Where a branch leaves its parent: the parent's text up to ``step``, then ``token_id`` in place of its
    token there."""

    parent: Generation
    step: int
    token_id: int

    @property
    def kept_ids(self) -> list[int]:
        """The written tokens the branch keeps: the parent's before the step, then the chosen alternative."""
        return [*self.parent.generated_ids[:self.step].tolist(), self.token_id]


def start_branch_from(loaded: LoadedModel, start: BranchStart, settings: WriteSettings) -> Decoder | None:
    """A decoder that continues the prompt, the kept tokens and the alternative for what is left of
    ``settings.max_new_tokens``, steered as the parent was; None when nothing is left to write (the budget is spent,
    or the alternative ends the text)."""
    left = settings.max_new_tokens - len(start.kept_ids)
    if left < 1 or start.token_id in eos_token_ids(loaded):
        return None
    prompt_ids = [*start.parent.prompt_ids.tolist(), *start.kept_ids]
    return start_decoding(loaded, prompt_ids, replace(settings, max_new_tokens=left), start.parent.steering)


def branch_of(start: BranchStart, decoder: Decoder | None, settings: WriteSettings) -> Generation:
    """The branch as one Generation of the parent's prompt: the kept steps, the alternative's step, then what the
    decoder has written since."""
    parent = start.parent
    steps = [*parent.steps[:start.step], forced_step(parent, start.step, start.token_id),
             *(generation_of(decoder).steps if decoder is not None else [])]
    return Generation(prompt_ids=parent.prompt_ids,
                      generated_ids=np.asarray([step.token_id for step in steps], dtype=np.int64), steps=steps,
                      settings=settings, steering=parent.steering)


def continue_from(loaded: LoadedModel, start: BranchStart, settings: WriteSettings) -> Generation:
    """Decode a branch to its end in one call."""
    decoder = start_branch_from(loaded, start, settings)
    while decoder is not None and not decoder.done:
        decoder.step()
    return branch_of(start, decoder, settings)
