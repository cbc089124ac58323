"""Gemma 2 and Gemma 3: sandwich norms, scaled token embeddings, a (1 + weight) RMSNorm; Gemma 2 softcaps logits."""

from dataclasses import replace

from .family import Family, llama_modules

GEMMA_MLP = ("down_proj(GELU(gate_proj(x)) × up_proj(x)), GELU in its tanh approximation (the config's "
             "hidden_activation): a gate and an up projection widen each position, their product is projected back.")

GEMMA2 = Family(
    name="Gemma 2",
    model_types=("gemma2",),
    # post_attention_layernorm is the attention's post-norm here; the MLP's input norm is pre_feedforward_layernorm.
    modules=llama_modules(attention_post_norm="model.layers.{i}.post_attention_layernorm",
                          mlp_norm="model.layers.{i}.pre_feedforward_layernorm",
                          mlp_post_norm="model.layers.{i}.post_feedforward_layernorm"),
    norms="sandwich",
    norm_adds_one=True,
    embedding_scale="sqrt_hidden",
    logit_softcap="final_logit_softcapping",
    description="Norms before and after each sublayer, embeddings times sqrt(hidden), logits softcapped.",
    part_notes={"mlp": GEMMA_MLP,
                "attention": "Its scores are soft-capped where the config sets attn_logit_softcapping, and "
                             "sliding-window layers alternate with global ones (the config's layer_types)."},
)

GEMMA3 = replace(
    GEMMA2,
    name="Gemma 3",
    model_types=("gemma3_text",),
    description="Gemma 2's sandwich block with per-head query and key norms and local/global attention layers.",
    part_notes={"mlp": GEMMA_MLP,
                "attention": "Before the rotation, each head's queries and keys pass an RMSNorm of their own (q_norm, "
                             "k_norm); sliding-window layers, five to each global one by default, are the config's "
                             "layer_types."},
)

FAMILIES = (GEMMA2, GEMMA3)
