"""Prompts of different lengths captured in one right-padded pass: each row equals its lone capture to the
precision's rounding, and every identity holds exactly within each row."""

from __future__ import annotations

import numpy as np
import pytest

from model_backend import capture_batch, capture_run, clean_logprob, load_model, logit_lens, unscaled_logprob
from model_backend.load_check import block_identities
from model_backend.names import full_name
from model_backend.tokens import encode_prompt

PROMPTS = ("The capital of France is Paris, and the capital of Italy is", "Short one", "A prompt of middle length here")
# Relative to the largest magnitude of each value: float32 sums in another order; bfloat16 products (8 bits).
TOLERANCE = {"float32": 1e-5, "bfloat16-matmuls": 2 ** -6}


@pytest.fixture(scope="module", params=[(family, dtype) for family in ("tiny_gpt2_dir", "tiny_llama_dir")
                                        for dtype in ("float32", "bfloat16-matmuls")], ids=lambda p: "-".join(p))
def batched(request):
    """A model, its lone captures of PROMPTS, and the same prompts captured together in one batch."""
    folder, dtype = request.param
    loaded = load_model(str(request.getfixturevalue(folder)), dtype=dtype)
    alone = [capture_run(loaded, prompt, bos=True) for prompt in PROMPTS]
    together = capture_batch(loaded, [encode_prompt(loaded, prompt, bos=True) for prompt in PROMPTS],
                             prompts=list(PROMPTS), bos=[True] * len(PROMPTS))
    return loaded, dtype, alone, together


def relative_difference(left: np.ndarray, right: np.ndarray) -> float:
    return float(np.abs(left - right).max() / max(np.abs(right).max(), 1e-12))


def test_each_row_equals_its_lone_capture_to_the_precisions_rounding(batched):
    loaded, dtype, alone, together = batched
    largest = 0.0
    for lone, row in zip(alone, together):
        assert row.tokens == lone.tokens and row.prompt == lone.prompt and set(row.values) == set(lone.values)
        for name, value in lone.values.items():
            assert row[name].shape == value.shape, name
            largest = max(largest, relative_difference(row[name], value))
        for summary in ("attention_column_sums", "attention_diagonal", "value_norms"):
            largest = max(largest, relative_difference(getattr(row, summary), getattr(lone, summary)))
        largest = max(largest, relative_difference(row.logits, lone.logits))
        for layer in range(loaded.n_layers):
            largest = max(largest, relative_difference(row.attention_probabilities(layer),
                                                       lone.attention_probabilities(layer)))
    print(f"{dtype}: largest difference from a lone capture, relative to the value's largest magnitude: {largest:.2e}")
    assert largest <= TOLERANCE[dtype]


def test_every_identity_holds_exactly_within_each_row(batched):
    loaded, _, _, together = batched
    for run in together:
        for layer in range(loaded.n_layers):
            for identity, left, right in block_identities(run, layer):
                assert np.array_equal(left, right), identity
            if layer + 1 < loaded.n_layers:
                assert np.array_equal(run[full_name("layer_output", layer)], run[full_name("layer_input", layer + 1)])
        assert logit_lens(loaded, run, k=3).last_row_max_abs_diff == 0.0
        for layer in range(loaded.n_layers):  # the recomputed pattern is the one the row's pass used
            np.testing.assert_allclose(run.attention_probabilities(layer).sum(axis=1), run.attention_column_sums[layer],
                                       rtol=1e-5, atol=1e-5)


def test_a_batch_of_one_is_the_lone_capture_bit_for_bit(batched):
    loaded, _, alone, _ = batched
    [one] = capture_batch(loaded, [encode_prompt(loaded, PROMPTS[0], bos=True)], prompts=[PROMPTS[0]], bos=[True])
    for name, value in alone[0].values.items():
        assert np.array_equal(one[name], value), name


def test_the_sweeps_clean_line_is_a_pass_alone_whatever_batch_the_run_came_from(batched):
    loaded, _, alone, together = batched
    for lone, row in zip(alone, together):
        target = int(lone.logits[-1].argmax())
        np.testing.assert_allclose(unscaled_logprob(loaded, row, target), clean_logprob(lone, target), atol=1e-5)
