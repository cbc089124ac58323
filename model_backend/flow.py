"""Information flow (Ferrando & Voita 2024): each block's contributions, exact, from one captured run.

A part's share of a whole is its L1 proximity ``max(|whole|_1 - |whole - part|_1, 0)`` over the sum of its whole's
parts' proximities. The attention's parts at query q are the block's input, the output projection's bias and, for
every head h and key k <= q, ``A_h[q, k] * v_h[k] @ W_O,h``: the values and pattern are read while the block's
attention is recomputed from its stored input (as ``Run.attention_probabilities`` does), ``W_O,h`` is the output
projection's block for head h. A post-norm after the attention (OLMo-2, Gemma) has its scale frozen at this run's
value, which keeps the sum exact; a parallel block's whole is its input plus attention_output (docs/families.md).
Queries are taken a few at a time, so a block never holds more than ``CHUNK_ELEMENTS`` floats of parts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .attribution import frozen_scale
from .capture import values_per_head
from .errors import PromptError, UnsupportedArchitectureError
from .flow_graph import FlowEdge, FlowGraph, FlowNode, InformationFlow, flow_graph
from .hooks import hook_output
from .loaded_model import LoadedModel
from .names import full_name
from .norms import detect_sinks
from .readout import norm_epsilon, norm_gain
from .run import Run

CHUNK_ELEMENTS = 1 << 18  # floats of [head, query, key, hidden] parts at once: a megabyte, which stays in cache
FLOW_MAX_BYTES = 1 << 30  # the [layer, head, query, key] share table an InformationFlow may hold
DECOMPOSED = {("sequential", "pre"), ("sequential", "post"), ("sequential", "sandwich"), ("parallel", "pre")}

__all__ = ["FlowEdge", "FlowGraph", "FlowNode", "InformationFlow", "LayerFlow", "flow_graph", "information_flow",
           "layer_flow"]


@dataclass(frozen=True)
class LayerFlow:
    """One block's shares: heads [head, query, key], and residual, bias, mlp, mlp_residual [seq]; its two checks."""

    heads: np.ndarray
    residual: np.ndarray
    bias: np.ndarray
    mlp: np.ndarray
    mlp_residual: np.ndarray
    attention_check: float
    mlp_check: float


def check_decomposed(loaded: LoadedModel) -> None:
    """Refuse a family whose block anatomy the decomposition does not cover, in words the page can show."""
    family = loaded.family
    if (family.residual, family.norms) not in DECOMPOSED:
        raise UnsupportedArchitectureError(
            f"information flow is not decomposed for {family.name} yet: its {family.residual} block with "
            f"{family.norms}-norms has no exact split into heads")


def check_table_fits(loaded: LoadedModel, n_tokens: int) -> None:
    """Refuse a prompt whose share table would pass ``FLOW_MAX_BYTES``, saying how long a prompt fits."""
    per_square = loaded.n_layers * loaded.n_heads * 4
    needed = per_square * n_tokens ** 2
    if needed > FLOW_MAX_BYTES:
        most = int((FLOW_MAX_BYTES / per_square) ** 0.5)
        raise PromptError(
            f"information flow at {n_tokens:,} tokens keeps {needed / 1e9:.1f} GB of shares ([{loaded.n_layers} "
            f"blocks, {loaded.n_heads} heads, {n_tokens:,} queries, {n_tokens:,} keys] float32), over its limit of "
            f"{FLOW_MAX_BYTES / 1e9:.1f} GB: shorten the prompt to at most {most:,} tokens, or write the shares to a "
            f"file with `python -m model_backend flow`, which computes one block at a time")


def information_flow(loaded: LoadedModel, run: Run) -> InformationFlow:
    """Every block's contribution shares for ``run``, with the largest error of each exactness check."""
    check_decomposed(loaded)
    check_table_fits(loaded, run.seq_len)
    layers = [layer_flow(loaded, run, layer) for layer in range(run.n_layers)]
    return InformationFlow(
        model_name=run.model_name, family_name=loaded.family.name, tokens=list(run.tokens), token_ids=run.token_ids,
        attention_heads=np.stack([layer.heads for layer in layers]),
        attention_residual=np.stack([layer.residual for layer in layers]),
        attention_bias=np.stack([layer.bias for layer in layers]),
        mlp=np.stack([layer.mlp for layer in layers]), mlp_residual=np.stack([layer.mlp_residual for layer in layers]),
        attention_check=max(layer.attention_check for layer in layers),
        mlp_check=max(layer.mlp_check for layer in layers),
        sink_positions=tuple(detect_sinks(run).sink_positions))


def layer_flow(loaded: LoadedModel, run: Run, layer: int) -> LayerFlow:
    """One block's shares, from its recomputed attention and its stored stream values."""
    check_decomposed(loaded)
    stream = torch.from_numpy(run[full_name("layer_input", layer)])
    pattern, moved, bias = head_parts(loaded, run, layer)  # [head, q, k], [head, k, hidden], [hidden]
    factor = post_norm_factors(loaded, run, layer)  # [seq, hidden] or None
    attention = torch.from_numpy(run[full_name("attention_output", layer)])
    mid = stream + attention if loaded.family.residual == "parallel" else torch.from_numpy(
        run[full_name("layer_mid", layer)])
    heads_sum = torch.einsum("hqk,hkd->qd", pattern, moved) + bias
    written = heads_sum if factor is None else heads_sum * factor
    biases = bias.expand_as(stream) if factor is None else bias * factor  # [seq, hidden]
    proximity = head_proximities(mid, pattern, moved, factor)
    residual, bias_part = proximities(mid, stream), proximities(mid, biases)
    total = proximity.sum(dim=(0, 2)) + residual + bias_part
    scale = torch.where(total > 0, 1 / total, torch.zeros_like(total))
    mlp_whole = torch.from_numpy(run[full_name("layer_output", layer)])
    mlp_write = torch.from_numpy(run[full_name("mlp_output", layer)])
    mlp_parts = torch.stack([proximities(mlp_whole, mlp_write), proximities(mlp_whole, mid)])
    mlp_total = mlp_parts.sum(dim=0)
    mlp_shares = mlp_parts * torch.where(mlp_total > 0, 1 / mlp_total, torch.zeros_like(mlp_total))
    return LayerFlow(heads=(proximity * scale[None, :, None]).numpy(), residual=(residual * scale).numpy(),
                     bias=(bias_part * scale).numpy(), mlp=mlp_shares[0].numpy(), mlp_residual=mlp_shares[1].numpy(),
                     attention_check=float((stream + written - mid).abs().max()),
                     mlp_check=float((mid + mlp_write - mlp_whole).abs().max()))


def proximities(whole: torch.Tensor, part: torch.Tensor) -> torch.Tensor:
    """``max(|whole|_1 - |whole - part|_1, 0)`` per position, [seq]."""
    return (whole.abs().sum(-1) - (whole - part).abs().sum(-1)).clamp_min(0)


def head_proximities(whole: torch.Tensor, pattern: torch.Tensor, moved: torch.Tensor,
                     factor: torch.Tensor | None) -> torch.Tensor:
    """Each head part's proximity [head, query, key]: ``A[h, q, k] * moved[h, k]`` (times the frozen post-norm factor
    at q) against the whole at q, a few queries at a time and only their keys up to the last query."""
    n_heads, seq, hidden = moved.shape
    out = torch.zeros(n_heads, seq, seq)
    whole_norm = whole.abs().sum(-1)
    start = 0
    while start < seq:
        end = min(seq, start + max(1, CHUNK_ELEMENTS // (n_heads * (start + 1) * hidden)))
        weights = pattern[:, start:end, :end, None]  # [head, q, k, 1]
        keys = moved[:, None, :end]  # [head, 1, k, hidden]
        if factor is not None:
            keys = keys * factor[None, start:end, None]  # [head, q, k, hidden]
        away = torch.addcmul(whole[None, start:end, None].neg(), weights, keys)  # part - whole
        near = (whole_norm[None, start:end, None] - torch.linalg.vector_norm(away, ord=1, dim=-1)).clamp_min(0)
        out[:, start:end, :end] = torch.where(weights[..., 0] != 0, near, 0.0)
        start = end
    return out


def head_parts(loaded: LoadedModel, run: Run, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The block's pattern [head, query, key], what each head would write from each key at full weight
    ``v_h[k] @ W_O,h`` [head, key, hidden], and the output projection's bias [hidden] (zeros where it has none), in
    float32, from the value projection's output read while the attention is recomputed."""
    read = {}

    def read_values(_module, _args, output):
        read["values"] = values_per_head(loaded, output[0]).float().cpu()  # [seq, kv_heads, head_dim]

    projection = loaded.module("attention_out", layer)
    handle = hook_output(loaded.module("value_projection", layer), read_values)
    try:
        pattern = torch.from_numpy(run.attention_probabilities(layer))
    finally:
        handle.remove()
    values = read["values"].repeat_interleave(loaded.n_heads // loaded.n_kv_heads, dim=1)  # head h reads kv h // n
    weight = output_matrix(projection, values.shape[1] * values.shape[2])  # [heads * head_dim, hidden]
    per_head = weight.unflatten(0, (values.shape[1], -1))  # [head, head_dim, hidden]
    moved = torch.einsum("khd,hde->hke", values, per_head)
    bias = getattr(projection, "bias", None)
    return pattern, moved, torch.zeros(weight.shape[1]) if bias is None else bias.detach().float().cpu()


def output_matrix(projection: torch.nn.Module, width: int) -> torch.Tensor:
    """The output projection as a [width, hidden] float32 matrix, ``heads @ matrix + bias`` (nn.Linear or GPT-2's
    Conv1D alike), read by projecting the identity."""
    weight = projection.weight
    with torch.inference_mode(), torch.autocast(weight.device.type, enabled=False):
        identity = torch.eye(width, dtype=weight.dtype, device=weight.device)
        zero = torch.zeros(1, width, dtype=weight.dtype, device=weight.device)
        return (projection(identity) - projection(zero)).float().cpu()


def post_norm_factors(loaded: LoadedModel, run: Run, layer: int) -> torch.Tensor | None:
    """What the attention's post-norm multiplies its input by at each position, its scale frozen at this run's
    value, [seq, hidden] (None where the block has no post-norm)."""
    norm = loaded.module("attention_post_norm", layer)
    if norm is None:
        return None
    unnormed = torch.from_numpy(run[full_name("attention_post_norm_input", layer)]).double()
    scales = torch.stack([frozen_scale(row, norm_epsilon(norm), centers=False) for row in unnormed])
    return (norm_gain(loaded, norm).cpu().double()[None] / scales[:, None]).float()
