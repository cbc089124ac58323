"""OLMo-2: post-norm blocks (each sublayer's output is normed before it is added), queries and keys normed whole."""

from .family import GATED_SILU_MLP, Family, llama_modules

OLMO2 = Family(
    name="OLMo-2",
    model_types=("olmo2",),
    modules={**{role: path for role, path in llama_modules().items() if role not in ("attention_norm", "mlp_norm")},
             "attention_post_norm": "model.layers.{i}.post_attention_layernorm",
             "mlp_post_norm": "model.layers.{i}.post_feedforward_layernorm"},
    norms="post",
    description="No norm before a sublayer: attention and MLP read the stream itself and their outputs are normed.",
    part_notes={"mlp": GATED_SILU_MLP,
                "attention": "Before the rotation, queries and keys pass an RMSNorm over all heads together (q_norm, "
                             "k_norm)."},
)

FAMILIES = (OLMO2,)
