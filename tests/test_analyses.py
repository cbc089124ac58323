"""The analyses on a Run: logit lens, attribution, cosine similarity, norms and sinks, interventions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import cosine_similarity

from conftest import PROMPT

from model_backend import (capture_run, detect_sinks, direct_logit_attribution, laminar_profile, load_model,
                           logit_lens, residual_norms, scaling_sweep, token_across_layers, tokens_within_layer)
from model_backend import lens as lens_module
from model_backend.attribution import readout_direction
from model_backend.boundaries import residual_boundaries
from model_backend.readout import unembed
from model_backend.norms import attention_share_received, median_where, value_norm_ratios

TARGET = 6342  # " Paris"


def test_logit_lens_last_row_is_the_models_logits(loaded, run):
    lens = logit_lens(loaded, run, k=5, target_id=TARGET)
    assert lens.top_ids.shape == (loaded.n_layers + 1, run.seq_len, 5)
    assert lens.last_row_max_abs_diff <= 1e-5
    np.testing.assert_array_equal(lens.top_ids[-1, :, 0], run.logits.argmax(axis=-1))
    probabilities = torch.from_numpy(run.logits).softmax(-1).numpy()
    np.testing.assert_allclose(lens.top_probs[-1, :, 0], probabilities.max(axis=-1), rtol=1e-5)
    np.testing.assert_allclose(lens.target_probs[-1], probabilities[:, TARGET], rtol=1e-5)
    expected_rank = (run.logits > run.logits[:, TARGET : TARGET + 1]).sum(axis=-1) + 1
    np.testing.assert_array_equal(lens.target_ranks[-1], expected_rank)
    assert "final norm" in lens.row_labels[-1] and lens.row_labels[0] == "embeddings"


def test_every_lens_row_is_its_boundarys_softmax_though_read_a_vocabulary_slice_at_a_time(loaded, run):
    lens = logit_lens(loaded, run, k=5, target_id=TARGET)
    assert len(lens_module.vocabulary_slices(loaded, TARGET)) > 1
    for row, (_, name) in enumerate(residual_boundaries(run)[:-1]):
        with torch.no_grad():
            logits = unembed(loaded, loaded.module("final_norm")(torch.from_numpy(run[name])[None]))[0]
        probabilities = logits.softmax(-1)
        np.testing.assert_allclose(lens.top_probs[row], probabilities.topk(5).values, rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(lens.target_probs[row], probabilities[:, TARGET], rtol=1e-5, atol=1e-8)
        target = logits[:, TARGET : TARGET + 1]
        ties = ((logits - target).abs() < 1e-4).sum(-1) - 1  # logits a product's rounding may put either side
        rank_difference = np.abs(lens.target_ranks[row] - ((logits > target).sum(-1) + 1).numpy())
        assert (rank_difference <= ties.numpy()).all()


def test_logit_lens_rows_read_through_the_final_norm(gpt2):
    run = capture_run(gpt2, PROMPT, bos=True)
    lens = logit_lens(gpt2, run, k=3)
    with torch.no_grad():
        embeddings = torch.from_numpy(run["layers.0.layer_input"])
        expected = gpt2.model.lm_head(gpt2.model.transformer.ln_f(embeddings)).topk(3).indices.numpy()
    np.testing.assert_array_equal(lens.top_ids[0], expected)


def test_a_lens_read_that_gives_way_stops_before_its_next_slice_of_the_unembedding(gpt2, monkeypatch):
    monkeypatch.setattr(lens_module, "LOGIT_ROWS_PER_GROUP", 1)  # one boundary per group
    monkeypatch.setattr(lens_module, "VOCABULARY_SLICE", gpt2.config.vocab_size // 2 + 1)  # two slices a boundary
    run, asked = capture_run(gpt2, PROMPT, bos=True), []

    def keep_reading_three_slices() -> bool:
        asked.append(True)
        return len(asked) <= 3

    assert logit_lens(gpt2, run, keep_reading=keep_reading_three_slices) is None
    assert len(asked) == 4  # asked before each slice: both of the first boundary, the first of the second, then no
    kept = logit_lens(gpt2, run, target_id=TARGET, keep_reading=lambda: True)
    whole = logit_lens(gpt2, run, target_id=TARGET)
    np.testing.assert_array_equal(kept.top_probs, whole.top_probs)


def test_boundaries_read_together_give_the_same_lens(loaded, run, monkeypatch):
    together = logit_lens(loaded, run, k=5, target_id=TARGET)
    assert len(lens_module.boundary_groups(loaded.n_layers + 1, run.seq_len)) == 2
    monkeypatch.setattr(lens_module, "LOGIT_ROWS_PER_GROUP", 1)
    alone = logit_lens(loaded, run, k=5, target_id=TARGET)
    np.testing.assert_array_equal(together.top_ids, alone.top_ids)
    np.testing.assert_allclose(together.top_probs, alone.top_probs, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(together.target_probs, alone.target_probs, rtol=1e-5, atol=1e-7)
    assert together.last_row_max_abs_diff == alone.last_row_max_abs_diff == 0.0


def test_raw_lens_skips_the_final_norm(loaded, run):
    raw = logit_lens(loaded, run, k=3, raw=True)
    with torch.no_grad():
        last = torch.from_numpy(run[f"layers.{loaded.n_layers - 1}.layer_output"])
        expected = loaded.module("lm_head")(last).topk(3).indices.numpy()
    np.testing.assert_array_equal(raw.top_ids[-1], expected)
    assert np.isnan(raw.last_row_max_abs_diff)


def test_direct_logit_attribution_sums_to_the_logit(loaded, run):
    for position in (-1, 2):
        attribution = direct_logit_attribution(loaded, run, TARGET, position=position)
        assert len(attribution.contributions) == len(attribution.labels)
        assert abs(attribution.total - attribution.logit) <= 1e-3 * max(1.0, abs(attribution.logit))
    assert attribution.labels[-1] == f"layers.{loaded.n_layers - 1}.mlp_output"
    has_norm_bias = loaded.family.name == "GPT-2"  # RMSNorm has no bias
    assert (attribution.bias_term != 0.0) == has_norm_bias


def test_heads_and_projection_bias_sum_to_their_blocks_attention_term(loaded, run):
    attribution = direct_logit_attribution(loaded, run, TARGET, position=3)
    projection_biases = attribution.projection_bias_contributions
    assert attribution.head_contributions.shape == (loaded.n_layers, loaded.n_heads)
    assert (projection_biases is not None) == (loaded.family.name == "GPT-2")  # Llama's o_proj has no bias
    for layer in range(loaded.n_layers):
        attention_term = attribution.contributions[attribution.labels.index(f"layers.{layer}.attention_output")]
        heads_and_bias = attribution.head_contributions[layer].sum() + (0.0 if projection_biases is None
                                                                        else projection_biases[layer])
        assert abs(heads_and_bias - attention_term) <= 1e-5 * max(1.0, abs(attention_term))
    labels, terms = attribution.bars(per_head=True)
    assert abs(terms.sum() - attribution.logit) <= 1e-3 * max(1.0, abs(attribution.logit))
    assert f"layers.1.attention_output.head_{loaded.n_heads - 1}" in labels
    assert "layers.1.attention_output" not in labels and "layers.1.mlp_output" in labels
    assert ("layers.1.attention_output.bias" in labels) == (projection_biases is not None)
    assert (labels[-1] == "final_norm.bias") == (loaded.family.name == "GPT-2")


def silenced_head_run(loaded, layer: int, head: int):
    """The prompt's run with one head's output zeroed at the input of its block's output projection."""
    def silence(_module, args):
        heads = args[0].clone()
        width = heads.shape[-1] // loaded.n_heads
        heads[..., head * width:(head + 1) * width] = 0.0
        return (heads,)

    handle = loaded.module("attention_out", layer).register_forward_pre_hook(silence)
    try:
        return capture_run(loaded, PROMPT, bos=True)
    finally:
        handle.remove()


def test_each_heads_term_is_what_silencing_that_head_takes_from_its_block(loaded, run):
    layer, position = 1, 4
    attribution = direct_logit_attribution(loaded, run, TARGET, position=position)
    direction = readout_direction(loaded, run, TARGET, position)
    name = f"layers.{layer}.attention_output"
    expected = [float(torch.from_numpy(run[name][position] - silenced_head_run(loaded, layer, head)[name][position])
                      .double() @ direction) for head in range(loaded.n_heads)]
    np.testing.assert_allclose(attribution.head_contributions[layer], expected, rtol=1e-4, atol=1e-7)
    assert len(set(np.round(expected, 5))) == loaded.n_heads  # distinct heads: a mixed-up split cannot pass


def test_attribution_defaults_to_the_top_prediction_at_the_last_position(loaded, run):
    attribution = direct_logit_attribution(loaded, run)
    assert attribution.position == run.seq_len - 1
    assert attribution.target_id == int(run.logits[-1].argmax())
    assert attribution.target_token == loaded.tokenizer.decode([attribution.target_id])
    assert attribution.logit == float(run.logits[-1].max())


def test_token_across_layers_matches_a_direct_computation(loaded, run):
    labels, matrix = token_across_layers(run, 3, center=True)
    assert labels[0] == "embeddings" and labels[-1] == "final norm" and len(labels) == loaded.n_layers + 2
    names = ["layers.0.layer_input", *(f"layers.{i}.layer_output" for i in range(loaded.n_layers)), "final_norm_output"]
    stacked = np.stack([run[name][3] for name in names])
    stacked = stacked - stacked.mean(axis=1, keepdims=True)
    unit = stacked / np.linalg.norm(stacked, axis=1, keepdims=True)
    np.testing.assert_allclose(matrix, unit @ unit.T, atol=1e-5)


def test_tokens_within_layer_can_leave_position_zero_out(run):
    positions, matrix = tokens_within_layer(run, "layers.1.layer_output", skip_first=True)
    assert positions[0] == 1 and matrix.shape == (run.seq_len - 1, run.seq_len - 1)
    np.testing.assert_allclose(np.diag(matrix), 1.0, atol=1e-5)
    np.testing.assert_allclose(matrix, cosine_similarity(run["layers.1.layer_output"][1:]), atol=1e-6)


def test_laminar_profile_holds_every_pair_at_every_boundary(loaded, run):
    profile = laminar_profile(run, skip_first=True)
    n = run.seq_len - 1
    assert profile.similarities.shape == (loaded.n_layers + 2, n * (n - 1) // 2)
    i, j = profile.pairs[0]
    _, within = tokens_within_layer(run, "final_norm_output", skip_first=True)
    assert profile.similarities[-1, 0] == within[i - 1, j - 1]


def test_residual_norms_per_boundary_and_position(loaded, run):
    norms = residual_norms(run)
    assert norms.shape == (loaded.n_layers + 1, run.seq_len)
    np.testing.assert_allclose(norms[-1], np.linalg.norm(run[f"layers.{loaded.n_layers - 1}.layer_output"], axis=1),
                               rtol=1e-6)


def test_attention_share_is_the_mean_over_later_queries(loaded, run):
    shares = attention_share_received(run)
    pattern = run.attention_probabilities(1)
    key = 2
    np.testing.assert_allclose(shares[1, :, key], pattern[:, key + 1 :, key].mean(axis=1), atol=1e-6)
    assert np.isnan(shares[:, :, -1]).all()


def test_value_ratios_come_from_the_value_projection(gpt2):
    run = capture_run(gpt2, PROMPT, bos=True)
    with torch.no_grad():
        normed = gpt2.model.transformer.h[1].ln_1(torch.from_numpy(run["layers.1.layer_input"]))
        values = gpt2.model.transformer.h[1].attn.c_attn(normed)[:, 2 * 48 :].reshape(run.seq_len, 4, 12)
    norms = values.norm(dim=-1).numpy()  # [seq, head]
    expected = norms[0] / np.median(norms[1:], axis=0)
    np.testing.assert_allclose(value_norm_ratios(run)[1, :, 0], expected, rtol=1e-5)


@pytest.fixture(scope="module")
def run_with_huge_position_zero(tiny_gpt2_dir):
    """A run of the tiny GPT-2 whose position-0 embedding is 200 times larger: a norm sink by construction."""
    loaded = load_model(str(tiny_gpt2_dir))
    with torch.no_grad():
        loaded.model.transformer.wpe.weight[0] *= 200.0
    return capture_run(loaded, PROMPT, bos=True)


def test_a_huge_position_zero_is_detected_as_a_norm_sink(run_with_huge_position_zero):
    report = detect_sinks(run_with_huge_position_zero)
    assert report.sink_positions == [0]
    assert "norm" in report.sinks[0].signals and report.sinks[0].norm_ratio > 10
    assert report.at(1).norm_ratio < 4


def test_random_model_has_no_sink(run):
    assert detect_sinks(run).sinks == []


def test_scaling_by_one_changes_nothing_and_by_other_factors_something(loaded, run):
    clean = float(torch.from_numpy(run.logits[-1]).log_softmax(-1)[TARGET])
    unchanged = scaling_sweep(loaded, run, TARGET, alpha=1.0)
    assert abs(unchanged.clean_logprob - clean) < 1e-4
    np.testing.assert_allclose(unchanged.scaled_logprobs, unchanged.clean_logprob, atol=1e-5)
    for site in ("layer_output", "attention_output", "mlp_output"):
        sweep = scaling_sweep(loaded, run, TARGET, alpha=0.5, site=site)
        assert sweep.scaled_logprobs.shape == (loaded.n_layers,)
        assert np.abs(sweep.scaled_logprobs - sweep.clean_logprob).max() > 1e-4


def test_skip_first_finds_no_sink_behind_a_position_zero_sink(run_with_huge_position_zero):
    run = run_with_huge_position_zero
    report = detect_sinks(run, skip_first=True)
    assert report.evidence[0].position == 1 and report.sinks == []
    assert np.isnan(value_norm_ratios(run, skip_first=True)[:, :, 0]).all()


def test_the_sink_report_keeps_the_residual_norms_the_views_draw(run):
    np.testing.assert_array_equal(detect_sinks(run).residual_norms, residual_norms(run))


def test_median_where_is_each_positions_median_of_its_chosen_values():
    generator = np.random.default_rng(0)
    values = generator.normal(size=(4, 3, 9))
    values[0, 1, 2] = np.nan  # chosen below: its median is NaN, as np.median gives
    values[1, 2, 5] = np.nan  # never chosen: no effect
    chosen = generator.random(values.shape) < 0.4
    chosen[0, 1, 2], chosen[1, 2, 5] = True, False
    chosen[:, :, 7] = False  # none chosen: NaN
    medians = median_where(values, chosen)
    for position in range(values.shape[-1]):
        picked = values[:, :, position][chosen[:, :, position]]
        expected = np.median(picked) if picked.size else np.nan
        np.testing.assert_array_equal(medians[position], expected)  # bit for bit, NaN where np.median is NaN
    assert np.isnan(medians[[2, 7]]).all() and not np.isnan(medians[5])
