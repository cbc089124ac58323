"""Where the model commits to each token it wrote: the first block whose output, read through the logit lens at the
position before, already ranks that token first."""

from __future__ import annotations

import numpy as np

from .lens import logit_lens
from .loaded_model import LoadedModel
from .run import Run

NEVER = -1


def commitment_blocks(loaded: LoadedModel, run: Run, generated_from: int) -> np.ndarray:
    """For each written position p (from ``generated_from`` on), the first block l whose output read through the
    final norm and unembedding at p - 1 ranks ``token_ids[p]`` first, [positions] int64.

    ``NEVER`` (-1) where no block before the last does: the last block's output read so is the model's readout
    itself, which ranks a greedy token first by construction (and a sampled one perhaps not at all)."""
    if not 1 <= generated_from <= run.seq_len:
        raise ValueError(f"generated_from must be in 1..{run.seq_len}, not {generated_from}")
    positions = np.arange(generated_from, run.seq_len)
    if not len(positions):
        return np.zeros(0, dtype=np.int64)
    lens = logit_lens(loaded, run, k=1, positions=positions - 1)
    # rows: the embeddings, then block 0's output .. the last block's (the readout); the readout is left out
    on_top = lens.top_ids[1:-1, :, 0] == run.token_ids[positions][None]  # [blocks but the last, positions]
    return np.where(on_top.any(axis=0), on_top.argmax(axis=0), NEVER).astype(np.int64)
