"""The logit lens: every residual boundary read through the model's own final norm and unembedding.

Rows are the embeddings (block 0's input) and each block's output. The last block's output read this way *is* the
model's readout, so the last row equals the logits. ``hidden_states[-1]`` in transformers is already post-final-norm
and must not be normed again; this module reads the raw block output instead. The full-vocabulary table is never
written: each slice of the vocabulary's logits is reduced (top-k, normaliser, the target's rank) before the next.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .boundaries import residual_boundaries
from .capture import to_model
from .loaded_model import LoadedModel
from .readout import unembed, unembed_slice
from .run import Run

LOGITS_PER_MATMUL = 2**23  # 32 MiB of float32 logits per lm_head call, where a whole table is written (the export)
LOGIT_ROWS_PER_GROUP = 512  # rows (boundaries x positions) read through each slice of lm_head together
VOCABULARY_SLICE = 2**12  # tokens per product: each slice of logits is reduced while in the cache
NEGLIGIBLE_EXPONENT = -80.0  # e**-80 beside the largest term's 1 vanishes in any float32 sum; exp's denormals are slow


@dataclass(frozen=True)
class LogitLens:
    """Top-k predictions per boundary and position, with one target token followed through the rows."""

    row_labels: list[str]
    top_ids: np.ndarray  # [row, seq, k] int64
    top_probs: np.ndarray  # [row, seq, k] float32
    target_id: int | None
    target_probs: np.ndarray | None  # [row, seq]
    target_ranks: np.ndarray | None  # [row, seq], 1 = the top token
    raw: bool
    last_row_max_abs_diff: float  # last row's logits against the model's (NaN for the raw lens)
    positions: np.ndarray  # [seq] the positions read, in order (all of them unless asked for fewer)

    @property
    def n_rows(self) -> int:
        return len(self.row_labels)


def logit_lens(loaded: LoadedModel, run: Run, *, k: int = 5, target_id: int | None = None,
               raw: bool = False, positions=None, keep_reading=None) -> LogitLens | None:
    """Read every boundary through the model's readout and keep, per position, the top ``k`` tokens.

    ``positions`` (a range or index array) reads only those positions: a page can show what is on screen first.
    ``keep_reading``, asked before each slice of the unembedding that a group of boundaries is read through, lets a
    read that nobody waits for yet give way: when it says False the read stops and returns None.
    """
    positions = np.arange(run.seq_len) if positions is None else np.asarray(positions, dtype=np.int64)
    boundaries = residual_boundaries(run)
    labels = [label for label, _ in boundaries]
    labels[-1] = f"{labels[-1]} → final norm (model output)" if not raw else f"{labels[-1]} (raw)"
    rows = LensRows(k, target_id)
    last_row_diff = float("nan")
    with loaded.computing():
        for group in boundary_groups(len(boundaries), len(positions)):
            residuals = torch.cat([to_model(loaded, run[boundaries[row][1]][positions]) for row in group], dim=1)
            normed = (residuals if raw else loaded.module("final_norm")(residuals))[0]
            if group[-1] < len(boundaries) - 1:
                reduction = reduced_in_slices(loaded, normed, k, target_id, keep_reading)
                if reduction is None:
                    return None
            elif keep_reading is not None and not keep_reading():
                return None
            else:  # the last boundary alone and whole, in the shape Run.read_logits uses
                logits = unembed(loaded, normed[None])[0].float()
                if not raw:
                    last_row_diff = difference_from_models_logits(loaded, run, positions, normed[None], logits.cpu())
                reduction = reduced_in_slices(loaded, normed, k, target_id, None, logits)
            rows.add(reduction, (len(group), len(positions)))
    return LogitLens(row_labels=labels, target_id=target_id, raw=raw, last_row_max_abs_diff=last_row_diff,
                     positions=positions, **rows.stacked())


def difference_from_models_logits(loaded: LoadedModel, run: Run, positions: np.ndarray, normed: torch.Tensor,
                                  last_row: torch.Tensor) -> float:
    """The largest difference between the lens's last row and the model's logits at ``positions``.

    The model's logits are lm_head on its own final norm's output (``Run.read_logits``, in this shape). Where the lens's
    final norm of the last block's output is that output bit for bit, the lens's lm_head call was the model's own on
    the same input in the same shape: the identity holds bit for bit without streaming a large unembedding a second
    time. Only a final norm that differs reads the model's logits, to measure by how much."""
    if torch.equal(normed, to_model(loaded, run["final_norm_output"][positions])):
        return 0.0
    return float((last_row - torch.from_numpy(run.read_logits(positions))).abs().max())


def boundary_groups(n_boundaries: int, n_positions: int) -> list[range]:
    """Boundaries read through each slice of lm_head together: as many as make ``LOGIT_ROWS_PER_GROUP`` rows, in
    groups as even as they come, and the last boundary alone.

    Each product streams its slice of the unembedding from memory, so a product on a few hundred rows costs little more
    than one on a few (``benchmarks/lens_benchmark.py``). The last boundary is read alone and whole, in the shape
    ``Run.read_logits`` uses."""
    per_group = max(1, LOGIT_ROWS_PER_GROUP // n_positions)
    n_groups = -(-(n_boundaries - 1) // per_group)
    per_group = -(-(n_boundaries - 1) // max(n_groups, 1))
    starts = range(0, n_boundaries - 1, per_group)
    return [range(start, min(start + per_group, n_boundaries - 1)) for start in starts] + [
        range(n_boundaries - 1, n_boundaries)]


def vocabulary_slices(loaded: LoadedModel, first_token: int | None) -> list[slice]:
    """The unembedding's rows in slices of ``VOCABULARY_SLICE``, the one holding ``first_token`` first (its logit
    ranks the others); one slice where lm_head's weight is not in memory and is read whole."""
    weight = loaded.module("lm_head").weight
    size = weight.shape[0]
    step = size if weight.device.type == "meta" else VOCABULARY_SLICE
    slices = [slice(start, min(start + step, size)) for start in range(0, size, step)]
    if first_token is not None:
        slices.sort(key=lambda tokens: not tokens.start <= first_token < tokens.stop)
    return slices


def reduced_in_slices(loaded: LoadedModel, normed: torch.Tensor, k: int, target_id: int | None, keep_reading,
                      logits: torch.Tensor | None = None) -> dict | None:
    """Rows of ``normed`` [n, d] read through the readout a slice of the vocabulary at a time, each slice reduced while
    it is in the cache: the top ``k`` ids and probabilities, and the target's probability and rank. The whole
    [n, vocab] table is never written (``logits`` given, already read whole, is reduced the same way).
    ``keep_reading`` is asked before each slice's product; None is returned once it says False."""
    slices, largest, sums, best_values, best_ids = vocabulary_slices(loaded, target_id), [], [], [], []
    target_logit, above = None, 0
    for tokens in slices:
        if keep_reading is not None and not keep_reading():
            return None
        part = (unembed_slice(loaded, normed, tokens) if logits is None else logits[:, tokens]).float()
        best = part.topk(min(k, part.shape[-1]), dim=-1)
        best_values.append(best.values)
        best_ids.append(best.indices + tokens.start)
        largest.append(best.values[:, :1])
        sums.append(torch.sub(part, largest[-1]).clamp_(min=NEGLIGIBLE_EXPONENT).exp_().sum(-1, keepdim=True))
        if target_id is not None:
            if target_logit is None:
                target_logit = part[:, target_id - tokens.start : target_id - tokens.start + 1]
            above = above + torch.sub(part, target_logit).gt_(0).sum(-1)  # a - b > 0 exactly where a > b
    top = torch.cat(largest, dim=-1).amax(-1, keepdim=True)
    log_normaliser = sum(total * torch.exp(peak - top) for peak, total in zip(largest, sums)).log() + top
    best = torch.cat(best_values, dim=-1).topk(k, dim=-1)
    reduction = {"top_ids": torch.cat(best_ids, dim=-1).gather(-1, best.indices),
                 "top_probs": (best.values - log_normaliser).exp()}
    if target_id is not None:
        reduction["target_probs"] = (target_logit - log_normaliser).exp()[:, 0]
        reduction["target_ranks"] = above.long() + 1
    return {name: values.cpu().numpy() for name, values in reduction.items()}


class LensRows:
    """Each group of boundaries' reductions, gathered as they are read into LogitLens's arrays."""

    def __init__(self, k: int, target_id: int | None):
        self.k, self.target_id = k, target_id
        self.top_ids, self.top_probs, self.target_probs, self.target_ranks = [], [], [], []

    def add(self, reduction: dict, cells: tuple[int, int]) -> None:
        """A group's reduction [row x position, ...] as [row, position, ...]."""
        self.top_ids.append(reduction["top_ids"].reshape(*cells, self.k))
        self.top_probs.append(reduction["top_probs"].reshape(*cells, self.k))
        if self.target_id is not None:
            self.target_probs.append(reduction["target_probs"].reshape(cells))
            self.target_ranks.append(reduction["target_ranks"].reshape(cells))

    def stacked(self) -> dict:
        """The reduced rows as LogitLens's arrays, [row, position, ...]."""
        def joined(parts):
            return np.concatenate(parts) if parts else None
        return {"top_ids": joined(self.top_ids), "top_probs": joined(self.top_probs),
                "target_probs": joined(self.target_probs), "target_ranks": joined(self.target_ranks)}


def joined_lens(parts: list[LogitLens]) -> LogitLens:
    """One lens from parts read at disjoint positions of the same run (same target and readout), in position order."""
    positions = np.concatenate([part.positions for part in parts])
    order = np.argsort(positions, kind="stable")

    def joined(arrays):
        return None if arrays[0] is None else np.concatenate(arrays, axis=1)[:, order]

    first = parts[0]
    return LogitLens(
        row_labels=first.row_labels,
        top_ids=joined([part.top_ids for part in parts]),
        top_probs=joined([part.top_probs for part in parts]),
        target_id=first.target_id,
        target_probs=joined([part.target_probs for part in parts]),
        target_ranks=joined([part.target_ranks for part in parts]),
        raw=first.raw,
        last_row_max_abs_diff=max(part.last_row_max_abs_diff for part in parts),
        positions=positions[order],
    )
