"""A family as data: where each role lives in a model's module tree, and how its block is built.

Paths are relative to the ``*ForCausalLM`` model; ``{i}`` stands for the block index, and a tuple lists
alternative paths, the first one the model has winning. From the block's anatomy (``residual``, ``norms``) follow
the values a family has and where each is read (``value_reads``); the capture code never changes per family.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..names import ALL_VALUES


@dataclass(frozen=True)
class Family:
    """One architecture family's module map and block anatomy, and the facts about it that the analyses need."""

    name: str
    model_types: tuple[str, ...]
    modules: dict[str, str | tuple[str, ...]]
    residual: str = "sequential"  # "sequential": the MLP reads layer_mid; "parallel": both sublayers read layer_input
    norms: str = "pre"  # before each sublayer ("pre"), after it ("post", OLMo-2), or both ("sandwich", Gemma 2/3)
    values_layout: str = "separate"  # value_projection's output: "separate" v, "fused" q|k|v, "interleaved" per head
    norm_adds_one: bool = False  # Gemma's RMSNorm scales by (1 + weight)
    final_norm_centers: bool = False  # LayerNorm subtracts the mean; RMSNorm does not
    embedding_scale: str | None = None  # "sqrt_hidden": the token embeddings are the lookup times sqrt(hidden_size)
    logit_softcap: str | None = None  # config attribute c: logits = c * tanh(lm_head output / c)
    when: dict = field(default_factory=dict)  # config values that pick this family among those of its model type
    config_overrides: dict = field(default_factory=dict)
    description: str = ""
    part_notes: dict[str, str] = field(default_factory=dict)  # per diagram part, a card's words the fields above lack

    def module_path(self, role: str, layer: int | None = None) -> str | None:
        """The dotted module path for a role (its first alternative), formatted for a block; None if it lacks it."""
        template = self.modules.get(role)
        if isinstance(template, tuple):
            template = template[0]
        return None if template is None else template.format(i=layer)

    def resolved_for(self, model) -> Family:
        """This family with each role's alternatives narrowed to the path ``model`` has."""
        names = {name for name, _ in model.named_modules()}

        def present(template):
            if not isinstance(template, tuple):
                return template
            found = [path for path in template if path.format(i=0) in names]
            return found[0] if found else template[0]
        return replace(self, modules={role: present(template) for role, template in self.modules.items()})

    def value_reads(self) -> dict[str, tuple[str, str]]:
        """Every value this family has -> (role, side) where it is read, in the vocabulary's order (``names``).

        A sublayer's ``*_output`` is what it writes into the stream: after its post-norm where it has one, whose
        input is then ``*_post_norm_input``. A parallel block has no ``layer_mid``.
        """
        post = self.norms in ("post", "sandwich")
        reads = {"token_embeddings": ("embed_tokens", "output")}
        if "embed_positions" in self.modules:
            reads["position_embeddings"] = ("embed_positions", "output")
        reads |= {"final_norm_output": ("final_norm", "output"), "logits": ("lm_head", "output"),
                  "layer_input": ("layer", "input"),
                  "attention_output": ("attention_post_norm" if post else "attention", "output")}
        if self.residual == "sequential":
            reads["layer_mid"] = ("mlp", "input") if self.norms == "post" else ("mlp_norm", "input")
        reads |= {"mlp_output": ("mlp_post_norm" if post else "mlp", "output"), "layer_output": ("layer", "output"),
                  "attention_probabilities": ("attention", "output[1]")}
        if post:
            reads |= {"attention_post_norm_input": ("attention", "output"), "mlp_post_norm_input": ("mlp", "output")}
        return {value.name: reads[value.name] for value in ALL_VALUES if value.name in reads}

    def has_value(self, name: str) -> bool:
        return name in self.value_reads()


GATED_SILU_MLP = ("down_proj(SiLU(gate_proj(x)) × up_proj(x)): a gate and an up projection widen each position, and "
                  "their product is projected back.")


def llama_modules(**extra: str) -> dict[str, str]:
    """The Llama-style module map under ``model.``, most later families' starting point."""
    return {
        "embed_tokens": "model.embed_tokens",
        "layer": "model.layers.{i}",
        "attention_norm": "model.layers.{i}.input_layernorm",
        "attention": "model.layers.{i}.self_attn",
        "attention_out": "model.layers.{i}.self_attn.o_proj",  # its input: the heads' outputs side by side
        "value_projection": "model.layers.{i}.self_attn.v_proj",
        "mlp_norm": "model.layers.{i}.post_attention_layernorm",
        "mlp": "model.layers.{i}.mlp",
        "final_norm": "model.norm",
        "lm_head": "lm_head",
        **extra,
    }
