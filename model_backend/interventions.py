"""Scaling one block's output (or one sublayer's) and watching a target token's log-probability at the end.

Each block is scaled on its own in a fresh forward pass; only the last position's logits are computed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .capture import first_tensor
from .hooks import hook_output
from .loaded_model import LoadedModel
from .run import Run

SCALABLE_SITES = ("layer_output", "attention_output", "mlp_output")  # read where the family says (value_reads)


@dataclass(frozen=True)
class ScalingSweep:
    """The target's log-probability at the last position with each block's ``site`` scaled by ``alpha``."""

    target_id: int
    site: str
    alpha: float
    clean_logprob: float
    scaled_logprobs: np.ndarray  # [layer]
    vocabulary_size: int  # how many tokens the logits score

    @property
    def uniform_logprob(self) -> float:
        """log p of any token when the output is uniform over the vocabulary: -ln(vocabulary size)."""
        return -math.log(self.vocabulary_size)


def changed_output_hook(change):
    """A forward hook that replaces a module's main output by ``change(output)``, keeping any tuple around it."""
    def replace(_module, _args, output):
        if isinstance(output, torch.Tensor):
            return change(output)
        return (change(first_tensor(output)), *output[1:])
    return replace


def scaled_output_hook(alpha: float):
    """A forward hook that multiplies a module's main output by ``alpha``, keeping any tuple around it."""
    return changed_output_hook(lambda output: output * alpha)


def last_position_logprob(loaded: LoadedModel, token_ids: torch.Tensor, target_id: int) -> float:
    """The log-probability of ``target_id`` as the next token after the whole prompt."""
    logits = loaded.model(input_ids=token_ids, use_cache=False, logits_to_keep=1).logits[0, -1]
    return float(logits.float().log_softmax(dim=-1)[target_id])


def clean_logprob(run: Run, target_id: int) -> float:
    """The target's log-probability after the prompt with nothing scaled: the run's own last logits, no new pass."""
    return float(torch.from_numpy(run.logits_at(-1)).log_softmax(dim=-1)[target_id])


def unscaled_logprob(loaded: LoadedModel, run: Run, target_id: int) -> float:
    """The target's log-probability from a pass of the prompt alone with nothing scaled: the clean line that the
    scaled passes, each a pass alone, are compared with. A run captured in a batch (``capture_batch``) may round its
    bfloat16 products otherwise than a pass alone; this line sits where an unscaled pass of the sweep would."""
    with loaded.computing():
        return last_position_logprob(loaded, torch.from_numpy(run.token_ids)[None].to(loaded.model.device), target_id)


def scaled_logprob(loaded: LoadedModel, run: Run, target_id: int, layer: int, *, alpha: float,
                   site: str = "layer_output") -> float:
    """The target's log-probability after the prompt with block ``layer``'s ``site`` scaled by ``alpha``."""
    if site not in SCALABLE_SITES:
        raise ValueError(f"site must be one of {', '.join(SCALABLE_SITES)}, not {site!r}")
    with loaded.computing():
        role, _ = loaded.family.value_reads()[site]
        handle = hook_output(loaded.module(role, layer), scaled_output_hook(alpha))
        try:
            return last_position_logprob(loaded, torch.from_numpy(run.token_ids)[None].to(loaded.model.device),
                                         target_id)
        finally:
            handle.remove()


def scaling_sweep(loaded: LoadedModel, run: Run, target_id: int, *, alpha: float = 0.8,
                  site: str = "layer_output") -> ScalingSweep:
    """Rerun the prompt once per block with that block's ``site`` scaled by ``alpha`` (the blog's demo 3)."""
    scaled = [scaled_logprob(loaded, run, target_id, layer, alpha=alpha, site=site) for layer in range(run.n_layers)]
    return ScalingSweep(target_id, site, alpha, clean_logprob(run, target_id), np.array(scaled), run.vocab_size)
