"""The sorted-rank median of the other positions gives exactly what a median per left-out position gives."""

from __future__ import annotations

import numpy as np
import pytest

from model_backend.norms import norm_ratios


def ratios_one_position_at_a_time(norms: np.ndarray) -> np.ndarray:
    """The definition: each position over the median of the row without it."""
    ratios = np.full(norms.shape, np.nan)
    for position in range(norms.shape[1]):
        others = np.delete(norms, position, axis=1)
        if others.shape[1]:
            ratios[:, position] = norms[:, position] / np.median(others, axis=1)
    return ratios


@pytest.mark.parametrize("n_positions", [1, 2, 3, 4, 7, 8, 64, 513])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_norm_ratios_equal_the_definition_exactly(n_positions, dtype):
    rng = np.random.default_rng(n_positions)
    norms = (rng.random((6, n_positions)) * 100).astype(dtype)
    norms[:, : n_positions // 3] = norms[:, :1]  # ties, as repeated tokens give
    np.testing.assert_array_equal(norm_ratios(norms), ratios_one_position_at_a_time(norms))
