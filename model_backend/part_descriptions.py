"""What each part of a block diagram does in each family, in a sentence or two: the box's short name and the
card's explanation. ``{n_heads}``, ``{n_kv_heads}`` and ``{group}`` (query heads per key/value head) are filled
from the run shown."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PartDescription:
    label: str  # the box's name in the open block
    what: str


RESIDUAL_ADD = PartDescription("⊕ add", "The sublayer's output is added to the residual stream; nothing else changes "
                                        "it, so the stream is the running sum of every contribution.")

# Parts that mean the same in every family.
EVERY_FAMILY = {
    "logits": PartDescription("logits", "One score per vocabulary token at every position: what lm_head writes and the "
                                        "model returns. A softmax of the last position's logits is the next-token "
                                        "distribution; every other view that names a token reads it from here."),
}

PART_DESCRIPTIONS = {
    "GPT-2": {
        "token_embeddings": PartDescription("token emb", "A lookup table (wte): one learned vector per vocabulary "
                                                         "token, the same table lm_head reads the logits with."),
        "position_embeddings": PartDescription("+ pos emb", "A second lookup table (wpe): one learned vector per "
                                                            "position, added to the token embeddings before block 0."),
        "block": PartDescription("block", "A pre-norm transformer block: attention, then an MLP, each reading a "
                                          "LayerNorm of the stream and adding its output back to it."),
        "attention_norm": PartDescription("LayerNorm 1", "LayerNorm (ln_1): subtracts each position's mean, divides "
                                                         "by its standard deviation, then applies a learned gain and "
                                                         "bias. Only attention reads it; the stream is unchanged."),
        "attention": PartDescription("attention", "{n_heads} heads; one fused projection (c_attn) makes each head's "
                                                  "query, key and value, a causal softmax mixes the values, and "
                                                  "c_proj writes the heads back to the stream's width."),
        "attention_add": RESIDUAL_ADD,
        "mlp_norm": PartDescription("LayerNorm 2", "LayerNorm (ln_2) of the stream after attention's add: "
                                                   "mean-centred, scaled, with a learned gain and bias."),
        "mlp": PartDescription("MLP", "c_fc widens each position to 4 × the stream's width, GELU, and c_proj "
                                      "projects back; every position is processed alone."),
        "mlp_add": RESIDUAL_ADD,
        "final_norm": PartDescription("final norm", "LayerNorm ln_f. transformers' hidden_states[-1] is its output, "
                                                    "not the last block's."),
        "lm_head": PartDescription("lm_head", "The unembedding: a dot product of the normed stream with every "
                                              "token's embedding (tied to wte) gives the logits."),
    },
    "Llama": {
        "token_embeddings": PartDescription("token emb", "A lookup table: one learned vector per vocabulary token. "
                                                         "No position vector is added: positions enter inside "
                                                         "attention, by rotating queries and keys (RoPE)."),
        "block": PartDescription("block", "A pre-norm block: grouped-query attention, then a gated MLP, each reading "
                                          "an RMSNorm of the stream and adding its output back to it."),
        "attention_norm": PartDescription("RMSNorm 1", "RMSNorm (input_layernorm): divides each position by its root "
                                                       "mean square and applies a learned gain. No mean subtraction, "
                                                       "no bias."),
        "attention": PartDescription("GQA attention", "Grouped-query attention: {n_heads} query heads share "
                                                      "{n_kv_heads} key/value heads ({group} each); queries and keys "
                                                      "are rotated by their position (rotary embeddings), and o_proj "
                                                      "writes the heads back to the stream."),
        "attention_add": RESIDUAL_ADD,
        "mlp_norm": PartDescription("RMSNorm 2", "RMSNorm (post_attention_layernorm): despite its name, it normalises "
                                                 "the stream after attention's add, before the MLP reads it."),
        "mlp": PartDescription("gated MLP", "down_proj(SiLU(gate_proj(x)) × up_proj(x)): a gate and an up projection "
                                            "widen each position, their product is projected back."),
        "mlp_add": RESIDUAL_ADD,
        "final_norm": PartDescription("final RMSNorm", "RMSNorm (model.norm). transformers' hidden_states[-1] is its "
                                                       "output, not the last block's."),
        "lm_head": PartDescription("lm_head", "The unembedding: a linear map from the normed stream to one logit per "
                                              "vocabulary token (SmolLM2 ties it to the token embeddings)."),
    },
    "Gemma 3": {
        "token_embeddings": PartDescription("token emb", "A lookup table: one learned vector per vocabulary token, "
                                                         "multiplied by √(the stream's width) before block 0 (this "
                                                         "value includes that scale). No position vector: positions "
                                                         "rotate queries and keys inside attention."),
        "block": PartDescription("block", "A sandwich block: attention, then a gated MLP, each reading an RMSNorm of "
                                          "the stream, its output normed again before it is added back."),
        "attention_norm": PartDescription("input norm", "RMSNorm (input_layernorm): divides each position by its root "
                                                        "mean square and multiplies by 1 + weight (Gemma stores the "
                                                        "gain minus one). Only attention reads it."),
        "attention": PartDescription("attention", "{n_heads} query heads share {n_kv_heads} key/value head(s); "
                                                  "queries and keys get their own RMSNorm and rotary positions. A "
                                                  "layer attends within a sliding window (local) or to every earlier "
                                                  "position (global), as its config's layer_types say; o_proj writes "
                                                  "the heads back."),
        "attention_post_norm": PartDescription("attn post-norm", "RMSNorm (post_attention_layernorm) of attention's "
                                                                 "output, before it is added to the stream."),
        "attention_add": RESIDUAL_ADD,
        "mlp_norm": PartDescription("MLP norm", "RMSNorm (pre_feedforward_layernorm) of the stream after attention's "
                                                "add: what the MLP reads."),
        "mlp": PartDescription("gated MLP", "down_proj(GELU(gate_proj(x)) × up_proj(x)), GELU in its tanh "
                                            "approximation: a gate and an up projection widen each position, their "
                                            "product is projected back."),
        "mlp_post_norm": PartDescription("MLP post-norm", "RMSNorm (post_feedforward_layernorm) of the MLP's output, "
                                                          "before it is added to the stream."),
        "mlp_add": RESIDUAL_ADD,
        "final_norm": PartDescription("final RMSNorm", "RMSNorm (model.norm), gain 1 + weight. transformers' "
                                                       "hidden_states[-1] is its output, not the last block's."),
        "lm_head": PartDescription("lm_head", "The unembedding, tied to the token embeddings (without their √width "
                                              "scale): one logit per vocabulary token."),
    },
}


def part_descriptions(family_name: str, n_heads: int, n_kv_heads: int) -> dict[str, PartDescription]:
    """The family's description of each diagram part (by kind) with the head counts filled in; only the logits' for a
    family that has none written yet."""
    counts = {"n_heads": n_heads, "n_kv_heads": n_kv_heads, "group": n_heads // max(n_kv_heads, 1)}
    return {key: PartDescription(description.label, description.what.format(**counts))
            for key, description in {**EVERY_FAMILY, **PART_DESCRIPTIONS.get(family_name, {})}.items()}
