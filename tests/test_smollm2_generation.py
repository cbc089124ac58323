"""SmolLM2-135M-Instruct writes after "The capital of France is", and steering block 10's input toward " Italy" and
away from " France" turns its continuation to Rome while it stays readable; alpha 0 writes the plain continuation.

Skipped without the package index, saying why, unless ``RSE_REQUIRE_SMOLLM2=1`` (see ``test_smollm2.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import package_index_model_or_skip

from model_backend import load_model
from model_backend.generation import WriteSettings, capture_generation, generate_tokens
from model_backend.model_names import SMOLLM2, SMOLLM2_COPY
from model_backend.names import full_name
from model_backend.steering import Steering, steering_for
from model_backend.tokens import encode_prompt

FRANCE = "The capital of France is"
TO_ITALY = Steering(block=10, toward=" Italy", away=" France", alpha=1.0)
SETTINGS = WriteSettings(max_new_tokens=16)


@pytest.fixture(scope="module")
def smollm2():
    return package_index_model_or_skip(lambda: load_model(SMOLLM2), "SmolLM2", "RSE_REQUIRE_SMOLLM2")


@pytest.fixture(scope="module")
def france_ids(smollm2):
    return encode_prompt(smollm2, FRANCE, bos=True)


@pytest.fixture(scope="module")
def plain(smollm2, france_ids):
    return generate_tokens(smollm2, france_ids, SETTINGS)


def test_plain_greedy_continuation_starts_with_paris(smollm2, plain):
    assert smollm2.tokenizer.decode(plain.generated_ids[:1].tolist()) == " Paris"
    assert len(plain.generated_ids) == SETTINGS.max_new_tokens


def test_steering_toward_italy_changes_the_continuation(smollm2, france_ids, plain):
    vector = steering_for(smollm2, TO_ITALY, bos=True)
    steered = generate_tokens(smollm2, france_ids, SETTINGS, vector)
    text = smollm2.tokenizer.decode(steered.generated_ids.tolist())
    assert not np.array_equal(steered.generated_ids, plain.generated_ids), text
    if smollm2.origin == SMOLLM2_COPY.origin:  # the setting was chosen on the package index copy's weights
        assert text.startswith(" Rome.") and "capital of Italy is Rome" in text, text
    run = capture_generation(smollm2, steered, prompt=FRANCE, bos=True)
    layer_input = run[full_name("layer_input", TO_ITALY.block)]
    np.testing.assert_array_equal(layer_input, run[full_name("layer_output", TO_ITALY.block - 1)] + vector.shift())


def test_alpha_zero_writes_the_plain_continuation(smollm2, france_ids, plain):
    zero = steering_for(smollm2, Steering(block=TO_ITALY.block, toward=TO_ITALY.toward, away=TO_ITALY.away,
                                          alpha=0.0), bos=True)
    np.testing.assert_array_equal(generate_tokens(smollm2, france_ids, SETTINGS, zero).generated_ids,
                                  plain.generated_ids)
