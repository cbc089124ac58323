"""Architecture families as data: where each role lives in a model's module tree.

Paths are relative to the ``*ForCausalLM`` model; ``{i}`` stands for the block index. Adding a family means adding
one ``Family`` entry; the capture code never changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import UnsupportedArchitectureError


@dataclass(frozen=True)
class Family:
    """One architecture family's module map and the facts about it that the analyses need."""

    name: str
    model_types: tuple[str, ...]
    modules: dict[str, str]
    value_projection: str  # the module whose output holds the attention values
    value_chunk: tuple[int, int]  # (which, of how many) equal chunks of that output are the values
    final_norm_centers: bool  # LayerNorm subtracts the mean; RMSNorm does not
    config_overrides: dict = field(default_factory=dict)
    description: str = ""

    def module_path(self, role: str, layer: int | None = None) -> str | None:
        """The dotted module path for a role, formatted for a block, or None if the family lacks the role."""
        template = self.modules.get(role)
        return None if template is None else template.format(i=layer)


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
        "mlp_norm": "transformer.h.{i}.ln_2",
        "mlp": "transformer.h.{i}.mlp",
        "final_norm": "transformer.ln_f",
        "lm_head": "lm_head",
    },
    value_projection="transformer.h.{i}.attn.c_attn",
    value_chunk=(2, 3),
    final_norm_centers=True,
    # GPT-2's upcast attention path exposes no pattern; in float32 it computes the same values as eager.
    config_overrides={"reorder_and_upcast_attn": False},
    description="LayerNorm, learned absolute positions added before block 0, fused c_attn projection.",
)

LLAMA = Family(
    name="Llama",
    model_types=("llama", "mistral", "qwen2"),
    modules={
        "embed_tokens": "model.embed_tokens",
        "layer": "model.layers.{i}",
        "attention_norm": "model.layers.{i}.input_layernorm",
        "attention": "model.layers.{i}.self_attn",
        "attention_out": "model.layers.{i}.self_attn.o_proj",  # its input: the heads' outputs side by side
        "mlp_norm": "model.layers.{i}.post_attention_layernorm",
        "mlp": "model.layers.{i}.mlp",
        "final_norm": "model.norm",
        "lm_head": "lm_head",
    },
    value_projection="model.layers.{i}.self_attn.v_proj",
    value_chunk=(0, 1),
    final_norm_centers=False,
    description="RMSNorm, rotary positions inside attention, grouped-query attention.",
)

FAMILIES = (GPT2, LLAMA)
SUPPORTED_MODEL_TYPES = tuple(t for family in FAMILIES for t in family.model_types)


def family_for(model_type: str) -> Family:
    """The family that handles a config's ``model_type``, or a clear error listing the supported ones."""
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    raise UnsupportedArchitectureError(
        f"architecture {model_type!r} is not supported; supported model types: {', '.join(SUPPORTED_MODEL_TYPES)}"
    )
