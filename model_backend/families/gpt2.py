"""GPT-2: LayerNorm, learned absolute positions added before block 0, queries, keys and values from one Conv1D."""

from .family import Family

GPT2 = Family(
    name="GPT-2",
    model_types=("gpt2",),
    modules={
        "embed_tokens": "transformer.wte",
        "embed_positions": "transformer.wpe",
        "layer": "transformer.h.{i}",
        "attention_norm": "transformer.h.{i}.ln_1",
        "attention": "transformer.h.{i}.attn",
        "attention_out": "transformer.h.{i}.attn.c_proj",  # its input: the heads' outputs side by side
        "value_projection": "transformer.h.{i}.attn.c_attn",
        "mlp_norm": "transformer.h.{i}.ln_2",
        "mlp": "transformer.h.{i}.mlp",
        "final_norm": "transformer.ln_f",
        "lm_head": "lm_head",
    },
    values_layout="fused",
    final_norm_centers=True,
    # GPT-2's upcast attention path exposes no pattern; in float32 it computes the same values as eager.
    config_overrides={"reorder_and_upcast_attn": False},
    description="LayerNorm, learned absolute positions added before block 0, fused c_attn projection.",
    part_notes={"mlp": "c_fc widens each position to 4 × the stream's width, GELU, and c_proj projects back.",
                "lm_head": "GPT-2 ties it to the token embeddings (wte)."},
)

FAMILIES = (GPT2,)
