"""The model's readout as its family defines it: lm_head on the final norm's output, then any logit softcap."""

from __future__ import annotations

import torch

from .loaded_model import LoadedModel


def logit_softcap(loaded: LoadedModel) -> float | None:
    """The cap c of ``logits = c * tanh(head / c)`` (Gemma 2), or None where the model returns lm_head's output."""
    attribute = loaded.family.logit_softcap
    return None if attribute is None else getattr(loaded.config, attribute, None)


def unembed(loaded: LoadedModel, normed: torch.Tensor) -> torch.Tensor:
    """The logits the model returns for a stream already through the final norm: lm_head, then the softcap."""
    logits = loaded.module("lm_head")(normed)
    cap = logit_softcap(loaded)
    return logits if cap is None else torch.tanh(logits / cap) * cap


def norm_gain(loaded: LoadedModel, norm: torch.nn.Module) -> torch.Tensor:
    """A norm's per-feature gain as it multiplies: ``weight``, or ``1 + weight`` for Gemma's RMSNorm."""
    weight = norm.weight.detach()
    return 1.0 + weight if loaded.family.norm_adds_one else weight


def norm_epsilon(norm: torch.nn.Module) -> float:
    """The epsilon a norm adds to the variance (LayerNorm and Gemma call it ``eps``, Llama ``variance_epsilon``)."""
    return getattr(norm, "eps", None) or getattr(norm, "variance_epsilon")
