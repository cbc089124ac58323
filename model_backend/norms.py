"""Residual norms per position, and attention-sink detection from three signals.

A sink is a position that absorbs attention the model does not need elsewhere. It shows as some of: a residual
norm far above the other positions' (GPT-2's position 0 is tens of times their median), a large
share of every later query's attention, and a small value vector in the heads that attend to it, so that all that
attention adds little to the stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .boundaries import residual_boundaries
from .run import Run

NORM_RATIO_THRESHOLD = 4.0
ATTENTION_SHARE_THRESHOLD = 0.30
VALUE_RATIO_THRESHOLD = 0.5


def residual_norms(run: Run, *, with_final_norm: bool = False) -> np.ndarray:
    """L2 norm of the residual stream, [boundary, position], for the boundaries of ``residual_boundaries``."""
    boundaries = residual_boundaries(run, with_final_norm=with_final_norm)
    return np.stack([np.linalg.norm(run[name], axis=-1) for _, name in boundaries])


def median_of_others(values: np.ndarray) -> np.ndarray:
    """For each entry of each row, the median of the other entries in its row, [rows, n] (NaN where n is 1).

    One sort per row: leaving out the entry of sorted rank r shifts the ranks above r down by one, so the median
    of the rest is read at a known rank of the sorted row. The same numbers as ``np.median`` of each row without
    the entry, without a pass per position.
    """
    n_rows, n = values.shape
    if n < 2:
        return np.full(values.shape, np.nan)
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(n), (n_rows, n)), axis=1)

    def at_rank_of_rest(r: int) -> np.ndarray:
        return np.take_along_axis(ordered, np.where(r < rank, r, r + 1), axis=1)

    n_rest = n - 1
    return (at_rank_of_rest((n_rest - 1) // 2) + at_rank_of_rest(n_rest // 2)) / 2


def norm_ratios(norms: np.ndarray) -> np.ndarray:
    """Each position's norm over the median of the other positions' at the same boundary, [boundary, position]."""
    return norms / median_of_others(norms)


def attention_share_received(run: Run) -> np.ndarray:
    """Share of the later queries' attention that lands on each key, [layer, head, key].

    Key k can only be seen by queries q >= k, and query k sees it trivially, so the share is the mean over q > k.
    The last key has no later query: its share is NaN.
    """
    n_later_queries = np.arange(run.seq_len - 1, -1, -1, dtype=np.float64)  # seq-1-k for key k
    received = run.attention_column_sums - run.attention_diagonal
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_later_queries > 0, received / n_later_queries, np.nan)


def value_norm_ratios(run: Run, *, skip_first: bool = False) -> np.ndarray:
    """Each position's value-vector norm over the median of the others', per query head, [layer, head, position].

    With ``skip_first`` position 0 is neither compared nor part of the others (its column is NaN).
    """
    first = 1 if skip_first else 0
    ratios = np.full(run.value_norms.shape, np.nan)
    kept = run.value_norms[:, :, first:]
    ratios[:, :, first:] = norm_ratios(kept.reshape(-1, kept.shape[-1])).reshape(kept.shape)
    heads_per_kv = run.n_heads // run.n_kv_heads
    return np.repeat(ratios, heads_per_kv, axis=1)


def middle_layers(n_layers: int) -> range:
    """The blocks between the first and last quarter, where GPT-2's sink is steadiest."""
    quarter = n_layers // 4
    return range(quarter, max(n_layers - quarter, quarter + 1))


@dataclass(frozen=True)
class SinkEvidence:
    """The three sink signals measured at one position, and which of them fired."""

    position: int
    token: str
    norm_ratio: float  # median over the middle blocks' outputs
    attention_share: float  # share of later queries' attention, mean over heads, median over layers
    layers_with_share: int  # layers whose mean share reaches ATTENTION_SHARE_THRESHOLD
    value_ratio: float  # value norm vs the others', median over the heads that attend to it; NaN if none do
    signals: tuple[str, ...]

    @property
    def is_sink(self) -> bool:
        return "norm" in self.signals or "attention" in self.signals


@dataclass(frozen=True)
class SinkReport:
    """Sink evidence at every candidate position, and the positions judged to be sinks."""

    evidence: list[SinkEvidence]
    n_layers: int
    residual_norms: np.ndarray  # [boundary, position]: ``residual_norms(run)``, kept for the views that draw it

    @property
    def sinks(self) -> list[SinkEvidence]:
        return [e for e in self.evidence if e.is_sink]

    @property
    def sink_positions(self) -> list[int]:
        return [e.position for e in self.sinks]

    def at(self, position: int) -> SinkEvidence | None:
        return next((e for e in self.evidence if e.position == position), None)


def detect_sinks(run: Run, *, skip_first: bool = False) -> SinkReport:
    """Measure the norm, attention and value signals at every position that later queries can see.

    ``skip_first`` leaves position 0 out, as a candidate and from every median, to find a sink behind the first.
    Each signal is measured for every candidate at once (the medians and means of each position's own numbers).
    """
    first = 1 if skip_first else 0
    candidates = slice(first, run.seq_len - 1)
    norms = residual_norms(run)
    norm_ratio_by_layer = norm_ratios(norms[1:, first:])
    middle = list(middle_layers(run.n_layers))
    norm_ratio = np.median(norm_ratio_by_layer[middle, : run.seq_len - 1 - first], axis=0)
    shares = attention_share_received(run)[:, :, candidates]  # [layer, head, candidate]
    layer_shares = np.ascontiguousarray(shares.transpose(0, 2, 1)).mean(axis=-1)  # [layer, candidate]
    attending_heads = shares >= ATTENTION_SHARE_THRESHOLD
    value_ratio = median_where(value_norm_ratios(run, skip_first=skip_first)[:, :, candidates], attending_heads)
    layers_with_share = (layer_shares >= ATTENTION_SHARE_THRESHOLD).sum(axis=0)
    median_share = np.median(layer_shares, axis=0)
    evidence = []
    for index, position in enumerate(range(first, run.seq_len - 1)):
        signals = []
        if norm_ratio[index] >= NORM_RATIO_THRESHOLD:
            signals.append("norm")
        if 2 * layers_with_share[index] >= run.n_layers:
            signals.append("attention")
        if value_ratio[index] <= VALUE_RATIO_THRESHOLD:
            signals.append("value")
        evidence.append(SinkEvidence(position, run.tokens[position], float(norm_ratio[index]),
                                     float(median_share[index]), int(layers_with_share[index]),
                                     float(value_ratio[index]), tuple(signals)))
    return SinkReport(evidence, run.n_layers, norms)


def median_where(values: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """For each position (last axis), the median of its ``values`` where ``chosen`` [layer, head, position]; NaN
    where none is chosen, or where a chosen value is NaN (as ``np.median`` of those values gives)."""
    n_rows, n_positions = values.shape[0] * values.shape[1], values.shape[2]
    flat_values, flat_chosen = values.reshape(n_rows, n_positions), chosen.reshape(n_rows, n_positions)
    ordered = np.sort(np.where(flat_chosen, flat_values, np.inf), axis=0)  # the chosen first, in order
    count = flat_chosen.sum(axis=0)
    columns = np.arange(n_positions)
    medians = (ordered[np.maximum(count - 1, 0) // 2, columns] + ordered[count // 2, columns]) / 2
    unknown = (count == 0) | (flat_chosen & np.isnan(flat_values)).any(axis=0)
    return np.where(unknown, np.nan, medians)
