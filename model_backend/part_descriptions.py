"""What each part of a block diagram does, in a sentence or two: the box's short name and the card's explanation.

The texts follow from the family's anatomy (``Family``: its norms, residual, values layout, (1 + weight) norms,
scaled embeddings, logit softcap) and its module names; what the anatomy does not say (the MLP's projections and
activation, norms inside attention) is the family's own ``part_notes``. Head counts come from the run shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from .families import Family


@dataclass(frozen=True)
class PartDescription:
    label: str  # the box's name in the open block
    what: str


RESIDUAL_ADD = PartDescription("⊕ add", "The sublayer's output is added to the residual stream; nothing else changes "
                                        "it, so the stream is the running sum of every contribution.")
PARALLEL_ADD = PartDescription("⊕ add", "Both sublayers' outputs are added to the block's input at once: "
                                        "layer_output = layer_input + attention_output + mlp_output. Nothing else "
                                        "changes the "
                                        "stream, so it is the running sum of every contribution.")
LOGITS = PartDescription("logits", "One score per vocabulary token at every position: what lm_head writes and the "
                                   "model returns. A softmax of the last position's logits is the next-token "
                                   "distribution; every other view that names a token reads it from here.")


def part_descriptions(family: Family, n_heads: int, n_kv_heads: int) -> dict[str, PartDescription]:
    """Every diagram part's description (by kind) for ``family``, with the run's head counts."""
    norm = "LayerNorm" if family.final_norm_centers else "RMSNorm"
    sequential = family.residual == "sequential"
    described = {
        "token_embeddings": PartDescription("token emb", token_embeddings_text(family)),
        "position_embeddings": PartDescription("+ pos emb", f"A second lookup table "
                                                            f"({leaf(family, 'embed_positions')}): one learned vector "
                                                            "per position, added to the token embeddings before "
                                                            "block 0."),
        "block": PartDescription("block", block_text(family, norm)),
        "attention_norm": PartDescription(f"{norm} 1", f"{norm} ({leaf(family, 'attention_norm')}): "
                                                       f"{norm_text(family)} Only attention reads it; the stream is "
                                                       "unchanged."),
        "attention": PartDescription("GQA attention" if n_kv_heads < n_heads else "attention",
                                     attention_text(family, n_heads, n_kv_heads)),
        "attention_post_norm": PartDescription("attn post-norm", post_norm_text(family, norm, "attention")),
        "attention_add": RESIDUAL_ADD,
        "mlp_norm": PartDescription(f"{norm} 2", mlp_norm_text(family, norm)),
        "mlp": PartDescription("MLP", " ".join(filter(None, (
            family.part_notes.get("mlp"), "Every position is processed alone.",
            "Its output is normed (MLP post-norm) before it is added." if family.norms != "pre" else "")))),
        "mlp_post_norm": PartDescription("MLP post-norm", post_norm_text(family, norm, "MLP")),
        "mlp_add": RESIDUAL_ADD if sequential else PARALLEL_ADD,
        "final_norm": PartDescription(f"final {norm}", f"{norm} ({leaf(family, 'final_norm')}): {norm_text(family)} "
                                                       "transformers' hidden_states[-1] is its output, not the last "
                                                       "block's; the logit lens reads every block through it."),
        "lm_head": PartDescription("lm_head", lm_head_text(family)),
        "logits": LOGITS,
    }
    return {key: replace_notes(family, key, description) for key, description in described.items()}


def replace_notes(family: Family, key: str, description: PartDescription) -> PartDescription:
    """The description with the family's own note for the part after it (the MLP's note opens its text instead)."""
    note = family.part_notes.get(key)
    if not note or key == "mlp":
        return description
    return PartDescription(description.label, f"{description.what} {note}")


def leaf(family: Family, role: str) -> str:
    """The last name of the role's module path: ``ln_1``, ``qkv_proj``."""
    return (family.module_path(role, 0) or role).rsplit(".", 1)[-1]


def norm_text(family: Family) -> str:
    if family.final_norm_centers:
        return ("subtracts each position's mean, divides by its standard deviation, then applies a learned gain and "
                "bias.")
    gain = ("a learned gain of (1 + weight), so a zero weight leaves the position as divided"
            if family.norm_adds_one else "a learned gain")
    return f"divides each position by its root mean square and applies {gain}; no mean subtraction, no bias."


def token_embeddings_text(family: Family) -> str:
    text = f"A lookup table ({leaf(family, 'embed_tokens')}): one learned vector per vocabulary token."
    if family.embedding_scale == "sqrt_hidden":
        text += " Each row is multiplied by √(hidden size) before block 0; token_embeddings is that product."
    if "embed_positions" in family.modules:
        return text + " A position vector is added to it before block 0."
    return text + " No position vector is added: positions enter inside attention, by rotating queries and keys."


def block_text(family: Family, norm: str) -> str:
    an = "an" if norm == "RMSNorm" else "a"
    if family.residual == "parallel":
        return (f"A parallel block: attention and the MLP each read {an} {norm} of the block's input, and both "
                "outputs are added to it, so there is no layer_mid between them.")
    if family.norms == "post":
        return (f"A post-norm block: attention, then an MLP, each reading the stream itself; each output passes "
                f"{an} {norm} before it is added back.")
    if family.norms == "sandwich":
        return (f"A sandwich-norm block: attention, then an MLP, each reading {an} {norm} of the stream; each output "
                f"passes a second {norm} before it is added back.")
    return (f"A pre-norm block: attention, then an MLP, each reading {an} {norm} of the stream and adding its output "
            "back to it.")


def attention_text(family: Family, n_heads: int, n_kv_heads: int) -> str:
    heads = (f"Grouped-query attention: {n_heads} query heads share {n_kv_heads} key/value heads "
             f"({n_heads // max(n_kv_heads, 1)} each)" if n_kv_heads < n_heads else f"{n_heads} heads")
    projection = leaf(family, "value_projection")
    made = {"fused": f"one fused projection ({projection}) makes every head's query, key and value, side by side "
                     "(q | k | v)",
            "interleaved": f"one projection ({projection}) makes every head's query, key and value, interleaved per "
                           "head (q, k, v of head 0, then of head 1, …)",
            "separate": f"separate projections make each head's query, key and value ({projection} the values)",
            }[family.values_layout]
    positions = "" if "embed_positions" in family.modules else (
        " Queries and keys are rotated by their position (rotary embeddings).")
    post = " Its output is normed (attention post-norm) before it is added." if family.norms != "pre" else ""
    return (f"{heads}; {made}, a causal softmax mixes the values, and {leaf(family, 'attention_out')} writes the "
            f"heads back to the stream's width.{positions}{post}")


def post_norm_text(family: Family, norm: str, sublayer: str) -> str:
    role = "attention_post_norm" if sublayer == "attention" else "mlp_post_norm"
    value = "attention" if sublayer == "attention" else "mlp"
    return (f"{norm} ({leaf(family, role)}) of the {sublayer}'s output before it is added: {norm_text(family)} "
            f"{value}_post_norm_input is its input, {value}_output what reaches the stream.")


def mlp_norm_text(family: Family, norm: str) -> str:
    module = leaf(family, "mlp_norm")
    reads = "the stream after attention's add" if family.residual == "sequential" else "the block's input"
    named = " Despite its name, it comes before the MLP." if "post" in module else ""
    return f"{norm} ({module}) of {reads}: {norm_text(family)} Only the MLP reads it.{named}"


def lm_head_text(family: Family) -> str:
    text = (f"The unembedding ({leaf(family, 'lm_head')}): a linear map from the normed stream to one logit per "
            "vocabulary token.")
    if family.logit_softcap:
        text += (f" Where the config sets {family.logit_softcap} (c), the logits are c · tanh(output / c): "
                 "soft-capped between −c and c.")
    return text
