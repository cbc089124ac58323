"""The standardized vocabulary: every value the backend captures, declared once with its shape and meaning.

Where a value is read depends on the block's anatomy, so each family says it (``Family.value_reads``); a family
has only the values its block defines (a parallel block has no ``layer_mid``). ``full_name`` builds a value's key
(``layers.3.layer_output``) and ``parse_full_name`` splits one: no other code formats or splits these keys.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ValueName:
    """One standardized value: its layout without the batch axis, what it means, and its TransformerLens hook."""

    name: str
    per_layer: bool
    layout: str
    meaning: str
    transformer_lens_hook: str | None

    def hook_name(self, layer: int | None = None) -> str | None:
        """The TransformerLens hook that reads the same point, formatted for a layer."""
        if self.transformer_lens_hook is None:
            return None
        return self.transformer_lens_hook.format(i=layer)


MODEL_VALUES = (
    ValueName("token_embeddings", False, "[seq, hidden]",
              "The token-embedding module's output, before any position term (times sqrt(hidden) on Gemma).",
              "hook_embed"),
    ValueName("position_embeddings", False, "[seq, hidden]",
              "The learned position embedding added to the token embeddings before block 0 (GPT-2).",
              "hook_pos_embed"),
    ValueName("final_norm_output", False, "[seq, hidden]",
              "The residual stream after the final norm: exactly what lm_head reads.",
              "ln_final.hook_normalized"),
    ValueName("logits", False, "[seq, vocab]",
              "The next-token logits the model returns (after its softcap, on Gemma 2).", None),
)

LAYER_VALUES = (
    ValueName("layer_input", True, "[seq, hidden]",
              "The residual stream entering the block.", "blocks.{i}.hook_resid_pre"),
    ValueName("attention_output", True, "[seq, hidden]",
              "What the attention sublayer adds to the stream (after its output projection, and its post-norm "
              "where the block has one).", "blocks.{i}.hook_attn_out"),
    ValueName("layer_mid", True, "[seq, hidden]",
              "The residual stream after the attention add: layer_input + attention_output (sequential blocks).",
              "blocks.{i}.hook_resid_mid"),
    ValueName("mlp_output", True, "[seq, hidden]",
              "What the MLP sublayer adds to the stream (after its post-norm where the block has one).",
              "blocks.{i}.hook_mlp_out"),
    ValueName("layer_output", True, "[seq, hidden]",
              "The residual stream leaving the block: its input plus attention_output and mlp_output.",
              "blocks.{i}.hook_resid_post"),
    ValueName("attention_probabilities", True, "[heads, query, key]",
              "The softmaxed attention pattern the values are mixed with (eager attention's weights).",
              "blocks.{i}.attn.hook_pattern"),
    ValueName("attention_post_norm_input", True, "[seq, hidden]",
              "The attention's own output, before the post-norm that makes it attention_output (OLMo-2, Gemma).",
              None),
    ValueName("mlp_post_norm_input", True, "[seq, hidden]",
              "The MLP's own output, before the post-norm that makes it mlp_output (OLMo-2, Gemma).", None),
)

ALL_VALUES = MODEL_VALUES + LAYER_VALUES
VALUES_BY_NAME = {value.name: value for value in ALL_VALUES}

RESIDUAL_SUBLAYER_ORDER = ("layer_input", "attention_output", "layer_mid", "mlp_output", "layer_output")

# The final norm's bias read through the unembedding: a term of the direct logit attribution, not a captured value.
FINAL_NORM_BIAS = "final_norm.bias"


def full_name(name: str, layer: int | None = None, part: str | None = None) -> str:
    """The key of a value, ``layers.3.layer_output`` or ``logits``; ``part`` names a piece of it
    (``layers.3.attention_output.head_5``), as the attribution labels its terms."""
    key = name if layer is None else f"layers.{layer}.{name}"
    return key if part is None else f"{key}.{part}"


def parse_full_name(key: str) -> tuple[ValueName, int | None, str | None]:
    """Split a key built by ``full_name`` back into its ValueName, layer index and part (None where absent)."""
    parts = key.split(".")
    if len(parts) >= 3 and parts[0] == "layers" and parts[1].isdigit():
        value = VALUES_BY_NAME.get(parts[2])
        if value is not None and value.per_layer and len(parts) <= 4:
            return value, int(parts[1]), parts[3] if len(parts) == 4 else None
    name, _, part = key.partition(".")
    value = VALUES_BY_NAME.get(name)
    if value is None or value.per_layer:
        raise KeyError(f"unknown value name {key!r}")
    return value, None, part or None
