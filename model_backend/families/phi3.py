"""Phi-3: the Llama block with one fused qkv projection and one fused gate_up projection."""

from .family import Family, llama_modules

PHI3 = Family(
    name="Phi-3",
    model_types=("phi3",),
    modules=llama_modules(value_projection="model.layers.{i}.self_attn.qkv_proj"),
    values_layout="fused",
    description="The Llama block; queries, keys and values from one qkv_proj, gate and up from one gate_up_proj.",
    part_notes={"mlp": "One gate_up_proj makes the gate and the up halves side by side, and down_proj projects "
                       "SiLU(gate) × up back."},
)

FAMILIES = (PHI3,)
