"""Qwen3: the Llama block with an RMSNorm on each head's queries and keys inside the attention."""

from .family import Family, llama_modules

QWEN3 = Family(
    name="Qwen3",
    model_types=("qwen3",),
    modules=llama_modules(),
    description="The Llama block; queries and keys pass a per-head RMSNorm before the rotary embedding.",
)

FAMILIES = (QWEN3,)
