"""Float32 weights and stream with bfloat16 matmuls: the identities stay exact, the readout stays float32."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from layouts.attribution_view import kind_of
from model_backend import capture_run, direct_logit_attribution, load_model, logit_lens, scaling_sweep
from model_backend.compute import emulated_bfloat16_warning, fastest_dtype
from model_backend.load_check import block_identities
from model_backend.readout import unembed
from viz_app.settings import configured_compute, warn_once

PROMPT = "The capital of France is Paris, and the capital of Italy is"


@pytest.fixture(scope="module", params=["tiny_gpt2_dir", "tiny_llama_dir"])
def both(request):
    """Each family's tiny model loaded twice: in float32, and with bfloat16 matmuls."""
    folder = str(request.getfixturevalue(request.param))
    return load_model(folder), load_model(folder, dtype="bfloat16-matmuls")


def test_the_page_and_the_npz_say_how_the_model_computes(both):
    _, mixed = both
    assert mixed.compute == "float32, bfloat16 matmuls on cpu" and mixed.dtype == "bfloat16-matmuls"
    assert mixed.model.dtype == torch.float32 and mixed.precision == torch.bfloat16


def test_the_blocks_compute_in_bfloat16_and_the_stream_stays_float32(both):
    exact, mixed = both
    exact_run, mixed_run = capture_run(exact, PROMPT, bos=True), capture_run(mixed, PROMPT, bos=True)
    name = f"layers.{exact.n_layers - 1}.mlp_output"
    assert mixed_run[name].dtype == np.float32
    difference = np.abs(mixed_run[name] - exact_run[name]).max()
    assert 0 < difference < 0.05 * np.abs(exact_run[name]).max()  # bfloat16 products: close, not equal
    # a bfloat16 matmul's output keeps 8 significant bits: every block write is a bfloat16 number
    assert np.array_equal(torch.from_numpy(mixed_run[name]).bfloat16().float().numpy(), mixed_run[name])
    assert mixed_run["token_embeddings"].tobytes() == exact_run["token_embeddings"].tobytes()


def test_every_block_identity_holds_exactly_with_bfloat16_matmuls(both):
    _, mixed = both
    run = capture_run(mixed, PROMPT, bos=True)
    for layer in range(mixed.n_layers):
        for identity, left, right in block_identities(run, layer):
            assert np.array_equal(left, right), identity


def test_the_readout_runs_in_float32(both):
    _, mixed = both
    run = capture_run(mixed, PROMPT, bos=True)
    normed = torch.from_numpy(run["final_norm_output"])[None]
    with torch.inference_mode():
        float32_readout = unembed(mixed, normed)[0].numpy()
    assert np.array_equal(run.logits, float32_readout)
    assert not np.array_equal(run.logits, torch.from_numpy(run.logits).bfloat16().float().numpy())


def test_the_lens_last_row_and_the_unscaled_sweep_equal_the_logits(both):
    _, mixed = both
    run = capture_run(mixed, PROMPT, bos=True)
    assert logit_lens(mixed, run, k=3).last_row_max_abs_diff == 0.0
    target = int(run.logits[-1].argmax())
    sweep = scaling_sweep(mixed, run, target, alpha=1.0)
    np.testing.assert_allclose(sweep.scaled_logprobs, sweep.clean_logprob, atol=1e-5)


def test_the_heads_split_still_sums_to_the_logit_with_each_projections_rounding_as_a_bar(both):
    exact, mixed = both
    for loaded, roundings in ((exact, 0), (mixed, exact.n_layers)):
        attribution = direct_logit_attribution(loaded, capture_run(loaded, PROMPT, bos=True))
        labels, terms = attribution.bars(per_head=True)
        assert abs(terms.sum() - attribution.logit) <= 1e-5 * max(abs(attribution.logit), 1)
        rounding = [term for label, term in zip(labels, terms) if kind_of(label) == "bfloat16 rounding"]
        assert len(rounding) == roundings and all(term != 0 for term in rounding)


def test_the_recomputed_pattern_is_the_one_the_pass_used(both):
    _, mixed = both
    run = capture_run(mixed, PROMPT, bos=True)
    for layer in range(mixed.n_layers):
        np.testing.assert_allclose(run.attention_probabilities(layer).sum(axis=1), run.attention_column_sums[layer],
                                   rtol=1e-5, atol=1e-5)


def test_the_page_uses_bfloat16_matmuls_only_where_the_cpu_has_them(monkeypatch):
    monkeypatch.setattr("model_backend.compute.Path.read_text", lambda _path: "flags : fpu avx2 avx512_bf16")
    assert fastest_dtype("cpu") == "bfloat16-matmuls" and fastest_dtype("cuda") == "float32"
    assert configured_compute([]) == {"device": "cpu", "dtype": "bfloat16-matmuls"}
    assert configured_compute(["--dtype", "float32"])["dtype"] == "float32"
    monkeypatch.setattr("model_backend.compute.Path.read_text", lambda _path: "flags : fpu avx2 avx512f")
    assert configured_compute([]) == {"device": "cpu", "dtype": "float32"}


def test_bfloat16_chosen_for_a_cpu_without_bfloat16_instructions_is_warned_of_in_the_server_log(monkeypatch,
                                                                                                   caplog):
    monkeypatch.setattr("model_backend.compute.Path.read_text", lambda _path: "flags : fpu avx2 fma")
    warn_once.cache_clear()  # another test may have said it already
    with caplog.at_level(logging.WARNING, logger="viz_app.settings"):
        assert configured_compute(["--dtype", "bfloat16-matmuls"])["dtype"] == "bfloat16-matmuls"
        configured_compute(["--dtype", "bfloat16-matmuls"])  # read again by each model's load: said once
        configured_compute([])
        configured_compute(["--dtype", "bfloat16", "--device", "cuda"])
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1
    assert "no bfloat16 instructions" in warnings[0] and "--dtype bfloat16-matmuls" in warnings[0]
    monkeypatch.setattr("model_backend.compute.Path.read_text", lambda _path: "flags : fpu avx2 amx_bf16")
    assert emulated_bfloat16_warning("cpu", "bfloat16") == ""


def test_an_unknown_dtype_is_refused_by_name(tiny_llama_dir):
    with pytest.raises(ValueError, match="bfloat16-matmuls"):
        load_model(str(tiny_llama_dir), dtype="float16")


def autocast_alone(folder: str):
    """The bfloat16-matmul mode as autocast alone computes it: float32 weights cast at every matmul."""
    from dataclasses import replace

    from model_backend.loading import readout_in_float32

    loaded = load_model(folder)
    readout_in_float32(loaded.model, loaded.module("lm_head"))
    return replace(loaded, matmul_dtype=torch.bfloat16)


@pytest.mark.parametrize("folder", ["tiny_gpt2_dir", "tiny_llama_dir"])
def test_the_kept_bfloat16_copies_give_autocasts_values_bit_for_bit(folder, request):
    folder = str(request.getfixturevalue(folder))
    kept, alone = load_model(folder, dtype="bfloat16-matmuls"), autocast_alone(folder)
    kept_run, alone_run = capture_run(kept, PROMPT, bos=True), capture_run(alone, PROMPT, bos=True)
    for name in kept_run.value_names():
        if not name.endswith("attention_probabilities"):
            assert np.array_equal(kept_run[name], alone_run[name]), name
    np.testing.assert_array_equal(kept_run.attention_probabilities(0), alone_run.attention_probabilities(0))


@pytest.mark.parametrize("folder", ["tiny_gpt2_dir", "tiny_llama_dir"])
def test_no_pass_casts_a_weight_and_the_float32_weights_stay(folder, request):
    loaded = load_model(str(request.getfixturevalue(folder)), dtype="bfloat16-matmuls")
    block = loaded.module("layer", 0)
    matrices = [m for m in block.modules() if hasattr(m, "kept_matmul_weight")]
    assert matrices and all(m.weight.dtype == torch.float32 for m in matrices)
    weight_shapes = {tuple(m.weight.shape) for m in matrices}
    with torch.profiler.profile(record_shapes=True) as profile:
        capture_run(loaded, PROMPT, bos=True)
    casts = [tuple(event.input_shapes[0]) for event in profile.events() if event.name == "aten::_to_copy"]
    assert casts and not weight_shapes & set(casts)  # the inputs are cast, never a weight
