"""Gemma 2 and Gemma 3: sandwich norms (the written contributions are the post-norms' outputs), the (1 + weight)
RMSNorm, token embeddings times sqrt(hidden), local attention layers, and Gemma 2's logit softcap."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import Gemma2Config, Gemma3TextConfig

from family_reference import TINY_SHAPE, check_against_reference, save_tiny_family_model

from model_backend import direct_logit_attribution
from model_backend.names import full_name

GEMMA_SHAPE = dict(TINY_SHAPE, num_key_value_heads=2, head_dim=16, sliding_window=4)
CONFIGS = {  # the browser test serves each one
    "Gemma 2": Gemma2Config(**GEMMA_SHAPE, final_logit_softcapping=3.0, attn_logit_softcapping=5.0),
    "Gemma 3": Gemma3TextConfig(**GEMMA_SHAPE, final_logit_softcapping=None,
                                layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
}


def sandwich_block(block, x, call):
    unnormed_attention, pattern = block.self_attn(block.input_layernorm(x), **call)
    attention = block.post_attention_layernorm(unnormed_attention)
    mid = x + attention
    unnormed_mlp = block.mlp(block.pre_feedforward_layernorm(mid))
    mlp = block.post_feedforward_layernorm(unnormed_mlp)
    return {"attention_post_norm_input": unnormed_attention, "attention_output": attention, "layer_mid": mid,
            "mlp_post_norm_input": unnormed_mlp, "mlp_output": mlp, "layer_output": mid + mlp,
            "attention_probabilities": pattern}


@pytest.mark.parametrize("family_name", CONFIGS)
def test_gemma_matches_the_reference(tmp_path, family_name):
    folder = save_tiny_family_model(tmp_path, CONFIGS[family_name])
    loaded, run = check_against_reference(folder, family_name, lambda model: model.model.layers, sandwich_block)
    lookup = loaded.model.model.embed_tokens.weight.detach()[torch.from_numpy(run.token_ids)]
    np.testing.assert_allclose(run["token_embeddings"], lookup.numpy() * np.sqrt(48), rtol=1e-6)
    sliding = run.attention_probabilities(0)
    assert (np.tril(sliding[:, :, :], k=-4) == 0).all()  # a local layer sees the last 4 keys only
    attribution = direct_logit_attribution(loaded, run, position=-1)
    assert attribution.total == pytest.approx(attribution.logit, abs=1e-4)
    labels, terms = attribution.bars(per_head=True)
    assert terms.sum() == pytest.approx(attribution.logit, abs=1e-4)
    assert full_name("attention_output", 0, "head_3") in labels


def test_gemma2_logits_are_softcapped(tmp_path):
    loaded, run = check_against_reference(save_tiny_family_model(tmp_path, CONFIGS["Gemma 2"]), "Gemma 2",
                                          lambda model: model.model.layers, sandwich_block)
    assert np.abs(run.logits).max() < 3.0
