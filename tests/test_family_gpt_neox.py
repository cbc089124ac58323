"""GPT-NeoX / Pythia: a parallel block (no layer_mid), values interleaved per head in query_key_value."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import GPTNeoXConfig

from family_reference import TINY_SHAPE, check_against_reference, save_tiny_family_model

from model_backend import capture_run, load_model
from model_backend.errors import FamilyMismatchError
from model_backend.families import family_for
from model_backend.names import full_name


def neox_config(parallel: bool) -> GPTNeoXConfig:
    return GPTNeoXConfig(**TINY_SHAPE, use_parallel_residual=parallel, attention_bias=True)


CONFIGS = {"GPT-NeoX": neox_config(parallel=True)}  # the browser test serves each one


def parallel_block(block, x, call):
    attention, pattern = block.attention(block.input_layernorm(x), **call)
    mlp = block.mlp(block.post_attention_layernorm(x))
    return {"attention_output": attention, "mlp_output": mlp, "layer_output": mlp + attention + x,
            "attention_probabilities": pattern}


def sequential_block(block, x, call):
    attention, pattern = block.attention(block.input_layernorm(x), **call)
    mid = x + attention
    mlp = block.mlp(block.post_attention_layernorm(mid))
    return {"attention_output": attention, "layer_mid": mid, "mlp_output": mlp, "layer_output": mid + mlp,
            "attention_probabilities": pattern}


def test_parallel_gpt_neox_matches_the_reference_and_has_no_layer_mid(tmp_path):
    folder = save_tiny_family_model(tmp_path, neox_config(parallel=True))
    loaded, run = check_against_reference(folder, "GPT-NeoX", lambda model: model.gpt_neox.layers, parallel_block)
    assert full_name("layer_mid", 0) not in run and full_name("layer_mid", 0) not in run.value_names()
    assert loaded.family.module_path("lm_head") == "lm_head"


def test_sequential_gpt_neox_is_its_own_anatomy(tmp_path):
    folder = save_tiny_family_model(tmp_path, neox_config(parallel=False))
    check_against_reference(folder, "GPT-NeoX (sequential)", lambda model: model.gpt_neox.layers, sequential_block)


def test_interleaved_values_give_each_heads_value_norms(tmp_path):
    loaded = load_model(str(save_tiny_family_model(tmp_path, neox_config(parallel=True))))
    run = capture_run(loaded, "one two three")
    block = loaded.model.gpt_neox.layers[1]
    with torch.no_grad():
        normed = block.input_layernorm(torch.from_numpy(run[full_name("layer_input", 1)]))
        qkv = block.attention.query_key_value(normed)  # [seq, heads * 3 * head_dim], [q k v] for each head in turn
    values = qkv.view(run.seq_len, loaded.n_heads, 3, -1)[:, :, 2]  # [seq, heads, head_dim]
    np.testing.assert_allclose(run.value_norms[1], values.norm(dim=-1).T.numpy(), rtol=1e-5)


def test_a_parallel_model_read_as_sequential_fails_naming_the_identity(tmp_path, monkeypatch):
    folder = save_tiny_family_model(tmp_path, neox_config(parallel=True))
    sequential = family_for(neox_config(parallel=False))
    monkeypatch.setattr("model_backend.loading.family_for", lambda config: sequential)
    with pytest.raises(FamilyMismatchError, match=r"GPT-NeoX \(sequential\) family: layers\.0\.layer_input \+ "
                                                  r"layers\.0\.attention_output == layers\.0\.layer_mid fails"):
        load_model(str(folder))
