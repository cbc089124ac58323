"""The logit lens: every residual boundary read through the model's own final norm and unembedding.

Rows are the embeddings (block 0's input) and each block's output. The last block's output read this way *is* the
model's readout, so the last row equals the logits. ``hidden_states[-1]`` in transformers is already post-final-norm
and must not be normed again; this module reads the raw block output instead. The full-vocabulary table is never
kept: each row is reduced to its top-k before the next is computed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from .boundaries import residual_boundaries
from .capture import to_model
from .loaded_model import LoadedModel
from .readout import unembed_in_slices
from .run import Run

LOGITS_PER_MATMUL = 2**23  # 32 MiB of float32 logits per lm_head call: 170 rows of a 49k vocabulary
LOGIT_ROWS_PER_MATMUL = 128  # and at least this many rows: 128 MiB of logits for a 262k vocabulary
VOCABULARY_SLICE = 2**15  # tokens per product within a group: a read that gives way stops within one slice


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
        for group in boundary_groups(len(boundaries), len(positions), loaded.config.vocab_size):
            residuals = torch.cat([to_model(loaded, run[boundaries[row][1]][positions]) for row in group], dim=1)
            normed = residuals if raw else loaded.module("final_norm")(residuals)
            # The last boundary alone and whole, in the shape Run.read_logits uses.
            slice_tokens = VOCABULARY_SLICE if group[-1] < len(boundaries) - 1 else None
            logits = unembed_in_slices(loaded, normed, slice_tokens, keep_reading)
            if logits is None:
                return None
            logits = logits[0].float().cpu().unflatten(0, (len(group), len(positions)))
            if group[-1] == len(boundaries) - 1 and not raw:
                last_row_diff = difference_from_models_logits(loaded, run, positions, normed, logits[-1])
            rows.add(logits)
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


def boundary_groups(n_boundaries: int, n_positions: int, vocab_size: int) -> list[range]:
    """Boundaries read through lm_head in one matmul: as many as ``LOGITS_PER_MATMUL`` allows, and enough to make
    ``LOGIT_ROWS_PER_MATMUL`` rows, the last one alone.

    lm_head's matmul runs at a fraction of its speed on a few rows (each call streams the whole unembedding), and a
    page reads a few positions at a time; a group of a hundred or more rows is about as fast per row as a larger one
    and lets a read give way often (``benchmarks/page_benchmark.py`` times the lens; the figures in
    ``benchmarks/README.md``). The last boundary is read alone, in the shape ``Run.read_logits`` uses.
    """
    per_group = max(1, LOGITS_PER_MATMUL // (n_positions * vocab_size), LOGIT_ROWS_PER_MATMUL // n_positions)
    n_groups = -(-(n_boundaries - 1) // per_group)
    per_group = -(-(n_boundaries - 1) // max(n_groups, 1))  # as even as they come: no last group of a few rows
    starts = range(0, n_boundaries - 1, per_group)
    return [range(start, min(start + per_group, n_boundaries - 1)) for start in starts] + [
        range(n_boundaries - 1, n_boundaries)]


class LensRows:
    """Each boundary's logits reduced to its top-k (and the target's probability and rank) as they are read: the
    full-vocabulary table is never kept."""

    def __init__(self, k: int, target_id: int | None):
        self.k, self.target_id = k, target_id
        self.top_ids, self.top_probs, self.target_probs, self.target_ranks = [], [], [], []

    def add(self, logits: torch.Tensor) -> None:
        """Reduce logits [row, position, vocab]: top-k, then only those k normalised. Each (row, position) is reduced
        on its own, the exponentials written into one reused vector: over a 262,144-token vocabulary, whole-table
        temporaries cost more than the arithmetic (``benchmarks/page_benchmark.py`` times the lens). The vectors are
        shared out between the cores this thread may use, each share reduced on one core by a thread of its own:
        torch would spread each small operation over the cores, which meet at a barrier after it, and a core busy
        elsewhere (another session, the browser) would hold up every one of the hundreds of them
        (``benchmarks/lens_benchmark.py``)."""
        vectors = logits.flatten(0, -2)
        first, *others = vectors.tensor_split(min(torch.get_num_threads(), len(REDUCING_HELPERS) + 1, len(vectors)))
        helped = [helper.submit(on_one_core, reduced, share, self.k, self.target_id)
                  for helper, share in zip(REDUCING_HELPERS, others)]
        shares = [on_one_core(reduced, first, self.k, self.target_id)] + [share.result() for share in helped]
        cells = logits.shape[:-1]
        self.top_ids.append(np.concatenate([share["top_ids"] for share in shares]).reshape(*cells, self.k))
        self.top_probs.append(np.concatenate([share["top_probs"] for share in shares]).reshape(*cells, self.k))
        if self.target_id is not None:
            self.target_probs.append(np.concatenate([share["target_probs"] for share in shares]).reshape(cells))
            self.target_ranks.append(np.concatenate([share["target_ranks"] for share in shares]).reshape(cells))

    def stacked(self) -> dict:
        """The reduced rows as LogitLens's arrays, [row, position, ...]."""
        def joined(parts):
            return np.concatenate(parts) if parts else None
        return {"top_ids": joined(self.top_ids), "top_probs": joined(self.top_probs),
                "target_probs": joined(self.target_probs), "target_ranks": joined(self.target_ranks)}


REDUCING_HELPERS = [ThreadPoolExecutor(max_workers=1, thread_name_prefix="lens-reduce")
                    for _ in range(torch.get_num_threads() - 1)]


def on_one_core(function, *args):
    """``function(*args)`` with torch's operations in this thread on one core."""
    cores = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return function(*args)
    finally:
        torch.set_num_threads(cores)


def reduced(vectors: torch.Tensor, k: int, target_id: int | None) -> dict:
    """Logit vectors [n, vocab] reduced: top-k ids and probabilities, and the target's probability and rank."""
    best = vectors.topk(k, dim=-1)
    log_normaliser = log_sum_exp(vectors, best.values[:, :1])
    share = {"top_ids": best.indices.numpy(), "top_probs": (best.values - log_normaliser).exp().numpy()}
    if target_id is not None:
        target_logit = vectors[:, target_id : target_id + 1]
        share["target_probs"] = (target_logit - log_normaliser).exp()[:, 0].numpy()
        share["target_ranks"] = (count_above(vectors, target_logit) + 1).numpy()
    return share


def log_sum_exp(logits: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """``logits.logsumexp(-1, keepdim=True)`` given each vector's largest logit ``top``, one vector at a time."""
    flat, flat_top = logits.flatten(0, -2), top.flatten()
    scratch = torch.empty_like(flat[0])
    sums = torch.stack([torch.sub(vector, largest, out=scratch).exp_().sum() for vector, largest in zip(flat, flat_top)])
    return (sums.log() + flat_top).view(top.shape)


def count_above(logits: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """How many logits of each vector exceed its ``threshold`` [..., 1], one vector at a time."""
    counts = [torch.count_nonzero(vector > limit) for vector, limit in zip(logits.flatten(0, -2), threshold.flatten())]
    return torch.stack(counts).view(threshold.shape[:-1])


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
