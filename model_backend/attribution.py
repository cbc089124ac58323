"""Direct logit attribution: how much each part that writes to the stream adds to one token's logit.

With the final norm's scale frozen at this run's value the readout is linear, so the logit splits exactly into
one term per writer (the embeddings, every attention_output and mlp_output) plus the norm's bias term.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .loading import LoadedModel
from .run import Run


@dataclass(frozen=True)
class LogitAttribution:
    """The terms of one logit at one position; ``contributions.sum() + bias_term`` is the logit."""

    target_id: int
    position: int
    labels: list[str]  # standardized full names of the writers
    contributions: np.ndarray  # [writer]
    bias_term: float  # the final norm's bias (and lm_head's, if any) through the unembedding
    logit: float  # the model's own logit

    @property
    def total(self) -> float:
        return float(self.contributions.sum() + self.bias_term)


def stream_writers(run: Run) -> list[str]:
    """Everything added into the residual stream, in order; their sum is the last block's output."""
    first = ["token_embeddings", "position_embeddings"] if "position_embeddings" in run else ["layers.0.layer_input"]
    writers = list(first)
    for layer in range(run.n_layers):
        writers += [f"layers.{layer}.attention_output", f"layers.{layer}.mlp_output"]
    return writers


def direct_logit_attribution(loaded: LoadedModel, run: Run, target_id: int, position: int = -1) -> LogitAttribution:
    """Split the logit of ``target_id`` at ``position`` into each writer's term through the frozen final norm."""
    position = position % run.seq_len
    norm = loaded.module("final_norm")
    epsilon = getattr(norm, "eps", None) or getattr(norm, "variance_epsilon")
    unembedding = loaded.module("lm_head").weight[target_id].detach().double()
    residual = torch.from_numpy(run[f"layers.{run.n_layers - 1}.layer_output"][position]).double()
    if loaded.family.final_norm_centers:
        scale = torch.sqrt(residual.var(unbiased=False) + epsilon)
    else:
        scale = torch.sqrt(residual.pow(2).mean() + epsilon)
    gain = norm.weight.detach().double()
    writers = stream_writers(run)
    contributions = []
    for name in writers:
        vector = torch.from_numpy(run[name][position]).double()
        if loaded.family.final_norm_centers:
            vector = vector - vector.mean()
        contributions.append(float((gain * vector / scale) @ unembedding))
    bias_term = 0.0
    if getattr(norm, "bias", None) is not None:
        bias_term += float(norm.bias.detach().double() @ unembedding)
    if getattr(loaded.module("lm_head"), "bias", None) is not None:
        bias_term += float(loaded.module("lm_head").bias[target_id])
    return LogitAttribution(target_id, position, writers, np.array(contributions), bias_term,
                            float(run.logits[position, target_id]))
