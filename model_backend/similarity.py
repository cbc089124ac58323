"""Cosine similarity of residual vectors: one token across boundaries, tokens within one, and every pair per layer.

Mean-centering subtracts each vector's mean over the hidden axis first. The final LayerNorm does the same, and a
shared offset along the all-ones direction otherwise makes every pair look alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .boundaries import residual_boundaries
from .run import Run


def cosine_similarity(vectors: np.ndarray) -> np.ndarray:
    """scikit-learn's pairwise cosine similarity of the rows, imported on first use, so that a page's first visit
    does not wait for scikit-learn's import."""
    from sklearn.metrics.pairwise import cosine_similarity as pairwise_cosine

    return pairwise_cosine(vectors)


def centered(vectors: np.ndarray) -> np.ndarray:
    """Vectors minus their own mean over the hidden axis."""
    return vectors - vectors.mean(axis=-1, keepdims=True)


def _prepared(vectors: np.ndarray, center: bool) -> np.ndarray:
    return centered(vectors) if center else vectors


def token_across_layers(run: Run, position: int, *, center: bool = False) -> tuple[list[str], np.ndarray]:
    """How one token's vector turns from boundary to boundary: labels and a [boundary, boundary] matrix."""
    boundaries = residual_boundaries(run, with_final_norm=True)
    stacked = np.stack([run[name][position] for _, name in boundaries])
    return [label for label, _ in boundaries], cosine_similarity(_prepared(stacked, center))


def tokens_within_layer(run: Run, boundary: str, *, center: bool = False,
                        skip_first: bool = False) -> tuple[list[int], np.ndarray]:
    """How the tokens relate at one boundary (a full name): kept positions and a [token, token] matrix."""
    positions = list(range(1 if skip_first else 0, run.seq_len))
    return positions, cosine_similarity(_prepared(run[boundary][positions], center))


@dataclass(frozen=True)
class LaminarProfile:
    """Every token pair's similarity at every boundary (the "smile" across depth)."""

    labels: list[str]
    pairs: list[tuple[int, int]]  # positions (i, j), i < j
    similarities: np.ndarray  # [boundary, pair]

    @property
    def mean(self) -> np.ndarray:
        return self.similarities.mean(axis=1)


def laminar_profile(run: Run, *, center: bool = False, skip_first: bool = True) -> LaminarProfile:
    """The off-diagonal pair similarities of ``tokens_within_layer`` at every boundary, final norm included."""
    boundaries = residual_boundaries(run, with_final_norm=True)
    positions = list(range(1 if skip_first else 0, run.seq_len))
    upper = np.triu_indices(len(positions), k=1)
    rows = [cosine_similarity(_prepared(run[name][positions], center))[upper] for _, name in boundaries]
    pairs = [(positions[i], positions[j]) for i, j in zip(*upper)]
    return LaminarProfile([label for label, _ in boundaries], pairs, np.stack(rows))
