"""The Llama family (Llama, Mistral, Qwen2): pre-norm RMSNorm blocks, rotary positions, grouped-query attention."""

from .family import GATED_SILU_MLP, Family, llama_modules

LLAMA = Family(
    name="Llama",
    model_types=("llama", "mistral", "qwen2"),
    modules=llama_modules(),
    description="RMSNorm, rotary positions inside attention, grouped-query attention.",
    part_notes={"mlp": GATED_SILU_MLP, "lm_head": "SmolLM2 ties it to the token embeddings."},
)

FAMILIES = (LLAMA,)
