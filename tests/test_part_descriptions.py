"""A card for every part of every family: each family's tiny config (the ones its ``test_family_*.py`` declares, and
GPT-2's and Llama's), every part of its diagram, a card that says what the part does in that family."""

from __future__ import annotations

import re

import pytest
from test_family_gpt_neox import neox_config
from test_page_families import FAMILY_CONFIGS
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

from layouts.cards import PartCard
from layouts.diagram_parts import diagram_parts
from model_backend.families import FAMILIES, family_for
from model_backend.part_descriptions import part_descriptions

TINY = dict(num_hidden_layers=2, max_position_embeddings=64, vocab_size=512)
CONFIGS = {**FAMILY_CONFIGS,
           "GPT-2": GPT2Config(n_layer=2, n_embd=48, n_head=4, n_positions=64, vocab_size=512),
           "Llama": LlamaConfig(hidden_size=48, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                                **TINY),
           "GPT-NeoX (sequential)": neox_config(parallel=False)}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def family_model(request):
    """The family and its tiny random-init model (module paths resolved against it)."""
    model = AutoModelForCausalLM.from_config(CONFIGS[request.param])
    family = family_for(model.config).resolved_for(model)
    assert family.name == request.param
    return family, model


def test_every_family_is_walked():
    assert sorted(CONFIGS) == sorted(family.name for family in FAMILIES)


def test_every_part_of_every_block_has_a_card_that_explains_it(family_model):
    family, model = family_model
    config = model.config
    n_heads = config.num_attention_heads
    descriptions = part_descriptions(family, n_heads, getattr(config, "num_key_value_heads", None) or n_heads)
    modules = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    for open_layer in range(config.num_hidden_layers):
        for part in diagram_parts(family, config.num_hidden_layers, open_layer):
            card = PartCard(part.id, family, config.num_hidden_layers, lambda _id: None, descriptions)
            assert len(card.what) > 60 and "{" not in card.what, (family.name, part.id, card.what)
            if part.kind.role is not None and part.kind.key not in ("logits",):
                named = re.findall(r" \(([a-z][a-z_0-9]+)\)", descriptions[part.kind.key].what)  # "LayerNorm (ln_1)"
                assert all(name in modules for name in named), (family.name, part.id, named)


def card(family_name: str, part: str) -> str:
    model = AutoModelForCausalLM.from_config(CONFIGS[family_name])
    family = family_for(model.config).resolved_for(model)
    config = model.config
    return part_descriptions(family, config.num_attention_heads,
                             getattr(config, "num_key_value_heads", None) or config.num_attention_heads)[part].what


@pytest.mark.parametrize("family_name, part, says", [
    ("GPT-2", "attention", "fused projection (c_attn)"),
    ("GPT-2", "token_embeddings", "position vector is added"),
    ("Llama", "attention", "share 2 key/value heads"),
    ("Llama", "mlp_norm", "Despite its name"),
    ("Qwen3", "attention", "q_norm, k_norm, over the head's dimensions"),
    ("Phi-3", "attention", "fused projection (qkv_proj)"),
    ("Phi-3", "mlp", "gate_up_proj"),
    ("OLMo-2", "block", "post-norm block"),
    ("OLMo-2", "attention", "over all heads together (q_norm"),
    ("OLMo-2", "mlp_post_norm", "mlp_post_norm_input is its input"),
    ("GPT-NeoX", "block", "parallel block"),
    ("GPT-NeoX", "mlp_add", "layer_input + attention_output + mlp_output"),
    ("GPT-NeoX", "attention", "interleaved per head"),
    ("GPT-NeoX", "attention", "only part of each head's dimensions"),
    ("GPT-NeoX (sequential)", "block", "pre-norm block"),
    ("Gemma 2", "block", "sandwich-norm block"),
    ("Gemma 2", "attention_norm", "(1 + weight)"),
    ("Gemma 2", "token_embeddings", "√(hidden size)"),
    ("Gemma 2", "lm_head", "final_logit_softcapping"),
    ("Gemma 3", "attention", "q_norm, k_norm"),
])
def test_a_card_says_what_its_family_does_differently(family_name, part, says):
    assert says in card(family_name, part)


def test_a_layer_norm_family_says_it_centres_and_an_rms_norm_family_that_it_does_not():
    assert "subtracts each position's mean" in card("GPT-2", "final_norm")
    assert "no mean subtraction" in card("Llama", "final_norm")
    assert "(1 + weight)" not in card("Llama", "final_norm")
