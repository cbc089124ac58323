"""Scaling one block's output (or one sublayer's) and watching a target token's log-probability at the end.

Each block is scaled on its own in a fresh forward pass; only the last position's logits are computed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .capture import first_tensor
from .loading import LoadedModel
from .run import Run

SCALABLE_SITES = {"layer_output": "layer", "attention_output": "attention", "mlp_output": "mlp"}


@dataclass(frozen=True)
class ScalingSweep:
    """The target's log-probability at the last position with each block's ``site`` scaled by ``alpha``."""

    target_id: int
    site: str
    alpha: float
    clean_logprob: float
    scaled_logprobs: np.ndarray  # [layer]


def scaled_output_hook(alpha: float):
    """A forward hook that multiplies a module's main output by ``alpha``, keeping any tuple around it."""
    def scale(_module, _args, output):
        if isinstance(output, torch.Tensor):
            return output * alpha
        return (first_tensor(output) * alpha, *output[1:])
    return scale


def last_position_logprob(loaded: LoadedModel, token_ids: torch.Tensor, target_id: int) -> float:
    """The log-probability of ``target_id`` as the next token after the whole prompt."""
    logits = loaded.model(input_ids=token_ids, use_cache=False, logits_to_keep=1).logits[0, -1]
    return float(logits.log_softmax(dim=-1)[target_id])


def scaling_sweep(loaded: LoadedModel, run: Run, target_id: int, *, alpha: float = 0.8,
                  site: str = "layer_output", progress=None) -> ScalingSweep:
    """Rerun the prompt once per block with that block's ``site`` scaled by ``alpha`` (the blog's demo 3)."""
    if site not in SCALABLE_SITES:
        raise ValueError(f"site must be one of {', '.join(SCALABLE_SITES)}, not {site!r}")
    token_ids = torch.from_numpy(run.token_ids)[None]
    scaled = []
    with loaded.hook_lock, torch.inference_mode():
        clean = last_position_logprob(loaded, token_ids, target_id)
        for layer in range(run.n_layers):
            module = loaded.module(SCALABLE_SITES[site], layer)
            handle = module.register_forward_hook(scaled_output_hook(alpha))
            try:
                scaled.append(last_position_logprob(loaded, token_ids, target_id))
            finally:
                handle.remove()
            if progress is not None:
                progress(layer + 1, run.n_layers)
    return ScalingSweep(target_id, site, alpha, clean, np.array(scaled))
