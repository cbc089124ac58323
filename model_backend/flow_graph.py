"""Information-flow routes (Ferrando & Voita 2024): each block's contribution shares as arrays, and the route graph
built backward from one position's last stream, its weak edges hidden. Plain numpy, so a view can import it.

Nodes are the stream at a position after a block's attention and after its MLP (and the embeddings, block 0's
input). As in the authors' tool, a whole's parts at or below the threshold are dropped and the rest renormalized to
sum to 1; an edge is kept where its share (an attention edge's: the sum over its heads) is above the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SITES = ("embeddings", "attention", "mlp")  # a node's stream: block 0's input, after the attention, after the MLP
EDGE_KINDS = ("attention", "residual", "mlp")


@dataclass(frozen=True)
class InformationFlow:
    """Every block's contribution shares for one run; each whole's shares sum to 1 (where its parts reach it at all).

    The attention's whole at (block, query) is the stream after the attention, its parts the block's input
    (``attention_residual``), the output projection's bias (``attention_bias``) and what each head moved from each
    key (``attention_heads``); the MLP's whole is the block's output, its parts the stream after the attention
    (``mlp_residual``) and the MLP's write (``mlp``). The checks are the largest |sum of parts - whole|.
    """

    model_name: str
    family_name: str
    tokens: list[str]
    token_ids: np.ndarray  # [seq] int64
    attention_heads: np.ndarray  # [layer, head, query, key] float32
    attention_residual: np.ndarray  # [layer, seq]
    attention_bias: np.ndarray  # [layer, seq]: zeros where the output projection has no bias
    mlp: np.ndarray  # [layer, seq]
    mlp_residual: np.ndarray  # [layer, seq]
    attention_check: float  # max |layer_input + bias + sum of head parts - stream after the attention|
    mlp_check: float  # max |stream after the attention + mlp_output - layer_output|
    sink_positions: tuple[int, ...]  # detect_sinks' sinks: attention edges from them are labelled

    @property
    def n_layers(self) -> int:
        return self.attention_heads.shape[0]

    @property
    def n_heads(self) -> int:
        return self.attention_heads.shape[1]

    @property
    def seq_len(self) -> int:
        return self.attention_heads.shape[2]

    @property
    def max_error(self) -> float:
        return max(self.attention_check, self.mlp_check)


@dataclass(frozen=True)
class FlowNode:
    """The stream at ``position`` at a stage: 0 the embeddings, ``2l + 1`` after block l's attention, ``2l + 2``
    after its MLP; drawn at height ``stage / 2`` (block l's attention half-way up its row)."""

    position: int
    stage: int

    @property
    def layer(self) -> int | None:
        return None if self.stage == 0 else (self.stage - 1) // 2

    @property
    def site(self) -> str:
        return SITES[0] if self.stage == 0 else SITES[2 - self.stage % 2]

    @property
    def height(self) -> float:
        return self.stage / 2


@dataclass(frozen=True)
class FlowEdge:
    """A kept route into ``target``: a key's stream through the attention (``head_shares`` per head, summing to
    ``share``), the residual, or the MLP's write; ``sink`` where an attention edge leaves a sink position."""

    source: FlowNode
    target: FlowNode
    kind: str
    share: float  # renormalized after the threshold
    head_shares: tuple[float, ...] = ()
    sink: bool = False


@dataclass(frozen=True)
class FlowGraph:
    """The routes into one position's last stream: only nodes and edges that reach it."""

    position: int
    threshold: float
    nodes: list[FlowNode]
    edges: list[FlowEdge]


def check_threshold(threshold: float) -> float:
    """A threshold as a float in [0, 1], or a ValueError that says what it must be."""
    try:
        value = float(threshold)
    except (TypeError, ValueError):
        raise ValueError(f"the threshold must be a number in [0, 1], not {threshold!r}") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"the threshold must be a number in [0, 1] (a share of a whole), not {threshold!r}")
    return value


def renormalized(parts: np.ndarray, threshold: float) -> np.ndarray:
    """Parts [..., part] with those at or below ``threshold`` dropped and the rest summing to 1 (all 0 where none is
    left)."""
    kept = np.where(parts > threshold, parts, 0.0)
    total = kept.sum(axis=-1, keepdims=True)
    return np.divide(kept, total, out=np.zeros_like(kept), where=total > 0)


def attention_parts(flow: InformationFlow, layer: int, queries: np.ndarray, threshold: float) -> tuple:
    """The attention's renormalized shares at ``queries`` of ``layer``: heads [query, head, key] and residual
    [query]."""
    heads = flow.attention_heads[layer][:, queries].transpose(1, 0, 2)  # [query, head, key]
    n = heads.shape[1] * heads.shape[2]
    parts = np.concatenate([heads.reshape(len(queries), n), flow.attention_residual[layer, queries, None],
                            flow.attention_bias[layer, queries, None]], axis=1)
    shares = renormalized(parts.astype(np.float64), threshold)
    return shares[:, :n].reshape(heads.shape), shares[:, n]


def flow_graph(flow: InformationFlow, position: int = -1, threshold: float = 0.04) -> FlowGraph:
    """The routes into ``position``'s stream after the last block, built backward block by block: at each whole the
    parts above ``threshold`` renormalized, and the edges above it kept."""
    threshold = check_threshold(threshold)
    if not -flow.seq_len <= position < flow.seq_len:
        raise IndexError(f"position {position} is outside 0..{flow.seq_len - 1}")
    position %= flow.seq_len
    sinks = set(flow.sink_positions)
    edges: list[FlowEdge] = []
    reached = {position}  # positions reached at the current stage
    for layer in reversed(range(flow.n_layers)):
        mid, out = 2 * layer + 1, 2 * layer + 2
        queries = np.array(sorted(reached))
        mlp = renormalized(np.stack([flow.mlp[layer, queries], flow.mlp_residual[layer, queries]], axis=1), threshold)
        reached_mid = set()
        for q, (mlp_share, residual_share) in zip(queries.tolist(), mlp.tolist()):
            for kind, share in (("mlp", mlp_share), ("residual", residual_share)):
                if share > threshold:
                    edges.append(FlowEdge(FlowNode(q, mid), FlowNode(q, out), kind, share))
                    reached_mid.add(q)
        reached = set()
        if not reached_mid:
            break
        queries = np.array(sorted(reached_mid))
        heads, residual = attention_parts(flow, layer, queries, threshold)
        for row, q in enumerate(queries.tolist()):
            if residual[row] > threshold:
                edges.append(FlowEdge(FlowNode(q, 2 * layer), FlowNode(q, mid), "residual", float(residual[row])))
                reached.add(q)
            per_key = heads[row].sum(axis=0)
            for k in np.flatnonzero(per_key > threshold).tolist():
                edges.append(FlowEdge(FlowNode(k, 2 * layer), FlowNode(q, mid), "attention", float(per_key[k]),
                                      tuple(heads[row, :, k].tolist()), k in sinks))
                reached.add(k)
    nodes = {FlowNode(position, 2 * flow.n_layers)} | {e.source for e in edges} | {e.target for e in edges}
    return FlowGraph(position, threshold, sorted(nodes, key=lambda n: (n.stage, n.position)), edges)
