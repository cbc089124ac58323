"""The standardized vocabulary: every value the backend captures, declared once with its shape and read point.

A read point names a *role* (a part every family has, such as ``mlp_norm``) and a side (the module's input or
output); a family maps each role to its own module path, so one capture loop serves every architecture.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ValueName:
    """One standardized value: where it is read, its layout without the batch axis, and what it means."""

    name: str
    per_layer: bool
    role: str  # the family role whose module is hooked
    side: str  # "input", "output" or "output[1]" (the second element of a tuple output)
    layout: str
    meaning: str
    transformer_lens_hook: str | None

    def full_name(self, layer: int | None = None) -> str:
        """The key under which a Run and the export store this value, e.g. ``layers.3.layer_output``."""
        return f"layers.{layer}.{self.name}" if self.per_layer else self.name

    def hook_name(self, layer: int | None = None) -> str | None:
        """The TransformerLens hook that reads the same point, formatted for a layer."""
        if self.transformer_lens_hook is None:
            return None
        return self.transformer_lens_hook.format(i=layer)


MODEL_VALUES = (
    ValueName("token_embeddings", False, "embed_tokens", "output", "[seq, hidden]",
              "The token-embedding lookup alone, before any position term.", "hook_embed"),
    ValueName("position_embeddings", False, "embed_positions", "output", "[seq, hidden]",
              "The learned position embedding added to the token embeddings before block 0 (GPT-2).",
              "hook_pos_embed"),
    ValueName("final_norm_output", False, "final_norm", "output", "[seq, hidden]",
              "The residual stream after the final norm: exactly what lm_head reads.",
              "ln_final.hook_normalized"),
    ValueName("logits", False, "lm_head", "output", "[seq, vocab]",
              "The next-token logits the model returns.", None),
)

LAYER_VALUES = (
    ValueName("layer_input", True, "layer", "input", "[seq, hidden]",
              "The residual stream entering the block.", "blocks.{i}.hook_resid_pre"),
    ValueName("attention_output", True, "attention", "output", "[seq, hidden]",
              "What the attention sublayer adds to the stream (after its output projection).",
              "blocks.{i}.hook_attn_out"),
    ValueName("layer_mid", True, "mlp_norm", "input", "[seq, hidden]",
              "The residual stream after the attention add: layer_input + attention_output.",
              "blocks.{i}.hook_resid_mid"),
    ValueName("mlp_output", True, "mlp", "output", "[seq, hidden]",
              "What the MLP sublayer adds to the stream.", "blocks.{i}.hook_mlp_out"),
    ValueName("layer_output", True, "layer", "output", "[seq, hidden]",
              "The residual stream leaving the block: layer_mid + mlp_output.", "blocks.{i}.hook_resid_post"),
    ValueName("attention_probabilities", True, "attention", "output[1]", "[heads, query, key]",
              "The softmaxed attention pattern the values are mixed with (eager attention's weights).",
              "blocks.{i}.attn.hook_pattern"),
)

ALL_VALUES = MODEL_VALUES + LAYER_VALUES
VALUES_BY_NAME = {value.name: value for value in ALL_VALUES}

RESIDUAL_SUBLAYER_ORDER = ("layer_input", "attention_output", "layer_mid", "mlp_output", "layer_output")

# The final norm's bias read through the unembedding: a term of the direct logit attribution, not a captured value.
FINAL_NORM_BIAS = "final_norm.bias"


def split_full_name(full_name: str) -> tuple[ValueName, int | None]:
    """Parse ``layers.3.layer_output`` or ``logits`` back into its ValueName and layer index."""
    parts = full_name.split(".")
    if len(parts) == 3 and parts[0] == "layers" and parts[1].isdigit():
        value = VALUES_BY_NAME.get(parts[2])
        if value is not None and value.per_layer:
            return value, int(parts[1])
    value = VALUES_BY_NAME.get(full_name)
    if value is None or value.per_layer:
        raise KeyError(f"unknown value name {full_name!r}")
    return value, None
