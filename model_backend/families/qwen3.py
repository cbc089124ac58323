"""Qwen3: the Llama block with an RMSNorm on each head's queries and keys inside the attention."""

from .family import GATED_SILU_MLP, Family, llama_modules

QWEN3 = Family(
    name="Qwen3",
    model_types=("qwen3",),
    modules=llama_modules(),
    description="The Llama block; queries and keys pass a per-head RMSNorm before the rotary embedding.",
    part_notes={"mlp": GATED_SILU_MLP,
                "attention": "Before the rotation, each head's queries and keys pass an RMSNorm of their own "
                             "(q_norm, k_norm, over the head's dimensions)."},
)

FAMILIES = (QWEN3,)
