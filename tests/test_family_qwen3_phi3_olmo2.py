"""Qwen3 (per-head query and key norms), Phi-3 (fused qkv_proj and gate_up_proj) and OLMo-2 (post-norm blocks)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import Olmo2Config, Phi3Config, Qwen3Config

from family_reference import TINY_SHAPE, check_against_reference, save_tiny_family_model

from model_backend import capture_run, direct_logit_attribution, load_model
from model_backend.names import full_name

GQA_SHAPE = dict(TINY_SHAPE, num_key_value_heads=2)


def pre_norm_block(block, x, call):
    attention, pattern = block.self_attn(block.input_layernorm(x), **call)
    mid = x + attention
    mlp = block.mlp(block.post_attention_layernorm(mid))
    return {"attention_output": attention, "layer_mid": mid, "mlp_output": mlp, "layer_output": mid + mlp,
            "attention_probabilities": pattern}


def post_norm_block(block, x, call):
    unnormed_attention, pattern = block.self_attn(x, **call)
    attention = block.post_attention_layernorm(unnormed_attention)
    mid = x + attention
    unnormed_mlp = block.mlp(mid)
    mlp = block.post_feedforward_layernorm(unnormed_mlp)
    return {"attention_post_norm_input": unnormed_attention, "attention_output": attention, "layer_mid": mid,
            "mlp_post_norm_input": unnormed_mlp, "mlp_output": mlp, "layer_output": mid + mlp,
            "attention_probabilities": pattern}


CASES = {
    "Qwen3": (Qwen3Config(**GQA_SHAPE, head_dim=16, attention_bias=True), pre_norm_block),
    "Phi-3": (Phi3Config(**GQA_SHAPE), pre_norm_block),
    "OLMo-2": (Olmo2Config(**GQA_SHAPE, attention_bias=True), post_norm_block),
}
CONFIGS = {name: config for name, (config, _) in CASES.items()}  # the browser test serves each one


@pytest.mark.parametrize("family_name", CASES)
def test_family_matches_the_reference(tmp_path, family_name):
    config, reference_block = CASES[family_name]
    folder = save_tiny_family_model(tmp_path, config)
    loaded, run = check_against_reference(folder, family_name, lambda model: model.model.layers, reference_block)
    attribution = direct_logit_attribution(loaded, run, position=-1)
    labels, terms = attribution.bars(per_head=True)
    assert terms.sum() == pytest.approx(attribution.logit, abs=1e-4)


def test_phi3_values_are_the_last_block_of_the_fused_projection(tmp_path):
    loaded = load_model(str(save_tiny_family_model(tmp_path, CASES["Phi-3"][0])))
    run = capture_run(loaded, "one two three")
    block = loaded.model.model.layers[2]
    with torch.no_grad():
        qkv = block.self_attn.qkv_proj(block.input_layernorm(torch.from_numpy(run[full_name("layer_input", 2)])))
    values = qkv[:, (4 + 2) * 12:].view(run.seq_len, 2, 12)  # after 4 query heads and 2 key heads of 12
    np.testing.assert_allclose(run.value_norms[2], values.norm(dim=-1).T.numpy(), rtol=1e-5)
