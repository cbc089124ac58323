"""The model's readout as its family defines it: lm_head on the final norm's output, then any logit softcap."""

from __future__ import annotations

import torch

from .loaded_model import LoadedModel


def logit_softcap(loaded: LoadedModel) -> float | None:
    """The cap c of ``logits = c * tanh(head / c)`` (Gemma 2), or None where the model returns lm_head's output."""
    attribute = loaded.family.logit_softcap
    return None if attribute is None else getattr(loaded.config, attribute, None)


def softcapped(loaded: LoadedModel, logits: torch.Tensor) -> torch.Tensor:
    """lm_head's output as the model returns it: through the family's logit softcap, where it has one."""
    cap = logit_softcap(loaded)
    return logits if cap is None else torch.tanh(logits / cap) * cap


def unembed(loaded: LoadedModel, normed: torch.Tensor) -> torch.Tensor:
    """The logits the model returns for a stream already through the final norm: lm_head, then the softcap."""
    return softcapped(loaded, loaded.module("lm_head")(normed))


def unembed_slice(loaded: LoadedModel, normed: torch.Tensor, tokens: slice) -> torch.Tensor:
    """``unembed``'s logits for the vocabulary entries ``tokens`` alone: those rows of lm_head, in its own dtype, then
    the softcap. A weight that is not in memory (a model spread by ``device="auto"``) is read whole by lm_head and
    then sliced."""
    lm_head = loaded.module("lm_head")
    weight, bias = lm_head.weight, getattr(lm_head, "bias", None)
    if weight.device.type == "meta":
        return unembed(loaded, normed)[..., tokens]
    with torch.autocast(normed.device.type, enabled=False):
        inputs = normed.to(device=weight.device, dtype=weight.dtype)
        logits = torch.nn.functional.linear(inputs, weight[tokens], None if bias is None else bias[tokens])
    return softcapped(loaded, logits)


def token_logits(loaded: LoadedModel, normed: torch.Tensor, token_ids: list[int]) -> torch.Tensor:
    """The logits of ``token_ids`` alone for a stream already through the final norm: those rows of lm_head (in float32,
    as the readout runs) and the softcap, without reading the rest of the vocabulary (a metric of two tokens needs two
    rows of a 262,144-row unembedding)."""
    lm_head = loaded.module("lm_head")
    ids = torch.as_tensor(token_ids, device=lm_head.weight.device)
    bias = None if getattr(lm_head, "bias", None) is None else lm_head.bias[ids].float()
    with torch.autocast(normed.device.type, enabled=False):
        logits = torch.nn.functional.linear(normed.float(), lm_head.weight[ids].float(), bias)
    return softcapped(loaded, logits)


def norm_gain(loaded: LoadedModel, norm: torch.nn.Module) -> torch.Tensor:
    """A norm's per-feature gain as it multiplies: ``weight``, or ``1 + weight`` for Gemma's RMSNorm."""
    weight = norm.weight.detach()
    return 1.0 + weight if loaded.family.norm_adds_one else weight


def norm_epsilon(norm: torch.nn.Module) -> float:
    """The epsilon a norm adds to the variance (LayerNorm and Gemma call it ``eps``, Llama ``variance_epsilon``)."""
    return getattr(norm, "eps", None) or getattr(norm, "variance_epsilon")
