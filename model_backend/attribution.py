"""Direct logit attribution: how much each part that writes to the stream adds to one token's logit.

With the final norm's scale frozen at this run's value the readout is linear, so the logit splits exactly into
one term per writer (the embeddings, every attention_output and mlp_output) plus the norm's bias term. Each
attention_output splits further into one term per head plus the output projection's bias,
``attention_output = sum_h z_h @ W_O[h] + b_O``, with ``z`` read at the projection's input while the block's
attention is recomputed from its stored ``layer_input`` (the way ``Run.attention_probabilities`` rebuilds it). Where
a post-norm follows the attention (OLMo-2, Gemma), its scale is frozen at this run's value too, which keeps the
split exact. On a softcapped model (Gemma 2) the terms sum to lm_head's logit before the softcap.

Labels are standardized names. ``bars(per_head=True)`` labels a head's term ``layers.{i}.attention_output.head_{h}``
and the projection's bias ``layers.{i}.attention_output.bias``; the final norm's bias term is ``final_norm.bias``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .capture import to_model
from .hooks import hook_input
from .loaded_model import LoadedModel
from .names import FINAL_NORM_BIAS, full_name, parse_full_name
from .readout import logit_softcap, norm_epsilon, norm_gain
from .run import Run
from .tokens import token_strings


@dataclass(frozen=True)
class LogitAttribution:
    """The terms of one logit at one position; ``contributions.sum() + bias_term`` is the logit."""

    target_id: int
    target_token: str  # the target decoded alone, leading space kept
    position: int
    labels: list[str]  # standardized full names of the writers
    contributions: np.ndarray  # [writer]
    head_contributions: np.ndarray  # [layer, head]: each head's share of its block's attention_output term
    projection_bias_contributions: np.ndarray | None  # [layer]: the attention output projection's bias, if it has one
    # [layer]: with bfloat16 matmuls, what the output projection's rounding adds to the heads' float32 split (the
    # block's attention_output term minus its heads and bias); None where the pass multiplied in the weights' dtype
    projection_rounding_contributions: np.ndarray | None
    bias_term: float  # the final norm's bias (and lm_head's, if any) through the unembedding
    logit: float  # the model's own logit (lm_head's, before a softcap)

    @property
    def total(self) -> float:
        return float(self.contributions.sum() + self.bias_term)

    def bars(self, per_head: bool = False) -> tuple[list[str], np.ndarray]:
        """Labels and terms in stream order, summing to the logit: one per writer, or every attention_output split
        into its heads and its projection's bias; the final norm's bias last (zero only where there is none)."""
        labels, terms = [], []
        for label, term in zip(self.labels, self.contributions):
            value, layer, _ = parse_full_name(label)
            if per_head and value.name == "attention_output":
                n_heads = self.head_contributions.shape[1]
                labels += [full_name(value.name, layer, f"head_{head}") for head in range(n_heads)]
                terms += list(self.head_contributions[layer])
                if self.projection_bias_contributions is not None:
                    labels.append(full_name(value.name, layer, "bias"))
                    terms.append(self.projection_bias_contributions[layer])
                if self.projection_rounding_contributions is not None:
                    labels.append(full_name(value.name, layer, "rounding"))
                    terms.append(self.projection_rounding_contributions[layer])
            else:
                labels.append(label)
                terms.append(term)
        if self.bias_term != 0.0:
            labels.append(FINAL_NORM_BIAS)
            terms.append(self.bias_term)
        return labels, np.array(terms, dtype=float)


def stream_writers(run: Run) -> list[str]:
    """Everything added into the residual stream, in order; their sum is the last block's output."""
    if "position_embeddings" in run:
        writers = ["token_embeddings", "position_embeddings"]
    else:
        writers = [full_name("layer_input", 0)]
    for layer in range(run.n_layers):
        writers += [full_name("attention_output", layer), full_name("mlp_output", layer)]
    return writers


def readout_direction(loaded: LoadedModel, run: Run, target_id: int, position: int) -> torch.Tensor:
    """The vector whose dot product with a stream vector at ``position`` is its term in the target's logit: the
    unembedding row through the final norm's gain, its scale frozen at this run's value, and its centering."""
    norm = loaded.module("final_norm")
    unembedding = loaded.module("lm_head").weight[target_id].detach().cpu().double()  # [hidden]
    residual = torch.from_numpy(run[full_name("layer_output", run.n_layers - 1)][position]).double()
    scale = frozen_scale(residual, norm_epsilon(norm), centers=loaded.family.final_norm_centers)
    direction = norm_gain(loaded, norm).cpu().double() * unembedding / scale  # [hidden]
    # (v - mean(v)) @ d == v @ (d - mean(d)): LayerNorm's centering moves onto the direction.
    return direction - direction.mean() if loaded.family.final_norm_centers else direction


def frozen_scale(vector: torch.Tensor, epsilon: float, *, centers: bool) -> torch.Tensor:
    """What a norm divides ``vector`` by: its standard deviation (LayerNorm) or root mean square (RMSNorm)."""
    spread = vector.var(unbiased=False) if centers else vector.pow(2).mean()
    return torch.sqrt(spread + epsilon)


def post_norm_factor(loaded: LoadedModel, run: Run, layer: int, position: int) -> torch.Tensor | float:
    """What the attention's post-norm multiplies its input by at ``position`` with its scale frozen (1 where the
    block has no post-norm): summed over heads, the scaled writes are attention_output."""
    norm = loaded.module("attention_post_norm", layer)
    if norm is None:
        return 1.0
    unnormed = torch.from_numpy(run[full_name("attention_post_norm_input", layer)][position]).double()
    return norm_gain(loaded, norm).cpu().double() / frozen_scale(unnormed, norm_epsilon(norm), centers=False)


def head_writes(loaded: LoadedModel, run: Run, layer: int, position: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each head's write into the stream at ``position`` [head, hidden] and the output projection's bias [hidden],
    from the projection's input read while the block's attention is recomputed."""
    projection = loaded.module("attention_out", layer)
    read = {}

    def read_heads(_module, args):
        read["heads"] = args[0][0, position].float().cpu()  # [heads * head_dim]

    handle = hook_input(projection, read_heads)
    try:
        run.attention_probabilities(layer)
    finally:
        handle.remove()
    dtype, device = projection.weight.dtype, projection.weight.device
    with torch.inference_mode():  # in the weights' dtype even after bfloat16 matmuls: see LogitAttribution
        heads = read["heads"]
        alone = torch.block_diag(*heads.unflatten(0, (run.n_heads, -1)))  # [head, heads * head_dim]: one head each
        bias = projection(torch.zeros_like(heads, dtype=dtype, device=device)).float().cpu()  # [hidden]
        return projection(alone.to(dtype=dtype, device=device)).float().cpu() - bias, bias


def head_terms(loaded: LoadedModel, run: Run, position: int,
               direction: torch.Tensor) -> tuple[np.ndarray, np.ndarray | None]:
    """Every head's term [layer, head], and the output projection's bias term [layer] (None where it has no bias)."""
    heads, biases = [], []
    for layer in range(run.n_layers):
        per_head, bias = head_writes(loaded, run, layer, position)
        factor = post_norm_factor(loaded, run, layer, position)
        heads.append((per_head.double() * factor @ direction).numpy())
        biases.append(float(bias.double() * factor @ direction))
    has_bias = getattr(loaded.module("attention_out", 0), "bias", None) is not None
    return np.stack(heads), np.array(biases) if has_bias else None


def final_bias_term(loaded: LoadedModel, target_id: int) -> float:
    """The final norm's bias (and lm_head's, if any) through the unembedding: the part of the logit no writer adds."""
    norm, lm_head = loaded.module("final_norm"), loaded.module("lm_head")
    term = 0.0
    if getattr(norm, "bias", None) is not None:
        term += float(norm.bias.detach().cpu().double() @ lm_head.weight[target_id].detach().cpu().double())
    if getattr(lm_head, "bias", None) is not None:
        term += float(lm_head.bias[target_id])
    return term


def direct_logit_attribution(loaded: LoadedModel, run: Run, target_id: int | None = None,
                             position: int = -1) -> LogitAttribution:
    """Split the logit of ``target_id`` (default: the model's top prediction) at ``position`` into each writer's
    term, and each attention_output's term into its heads', through the frozen final norm."""
    position = position % run.seq_len
    logits = run.logits_at(position)  # [vocab]
    if target_id is None:
        target_id = int(logits.argmax())
    direction = readout_direction(loaded, run, target_id, position)
    writers = stream_writers(run)
    contributions = np.array([float(torch.from_numpy(run[name][position]).double() @ direction) for name in writers])
    heads, projection_biases = head_terms(loaded, run, position, direction)
    return LogitAttribution(target_id, token_strings(loaded, [target_id])[0], position, writers, contributions,
                            heads, projection_biases,
                            projection_rounding(loaded, writers, contributions, heads, projection_biases),
                            final_bias_term(loaded, target_id),
                            head_logit(loaded, run, target_id, position, float(logits[target_id])))


def projection_rounding(loaded: LoadedModel, writers: list[str], contributions: np.ndarray, heads: np.ndarray,
                        projection_biases: np.ndarray | None) -> np.ndarray | None:
    """Per block, the attention_output term the heads' float32 split leaves out when the pass multiplied in
    bfloat16: the output projection's rounding, shown as a bar of its own so that the bars still sum to the logit."""
    if loaded.matmul_dtype is None:
        return None
    attention = np.array([contributions[writers.index(full_name("attention_output", layer))]
                          for layer in range(heads.shape[0])])
    return attention - heads.sum(axis=1) - (0.0 if projection_biases is None else projection_biases)


def head_logit(loaded: LoadedModel, run: Run, target_id: int, position: int, logit: float) -> float:
    """lm_head's logit behind the ``logit`` the model returned: read again before the softcap (Gemma 2), else the
    logit itself."""
    if logit_softcap(loaded) is None:
        return logit
    with loaded.computing():
        head = loaded.module("lm_head")(to_model(loaded, run["final_norm_output"][position : position + 1]))
    return float(head[0, 0, target_id])
