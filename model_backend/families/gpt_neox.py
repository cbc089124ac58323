"""GPT-NeoX and Pythia: LayerNorm, rotary positions, values interleaved per head in one fused projection, and a
parallel residual block (attention and MLP both read the block's input) unless ``use_parallel_residual`` is off."""

from dataclasses import replace

from .family import Family

GPT_NEOX = Family(
    name="GPT-NeoX",
    model_types=("gpt_neox",),
    modules={
        "embed_tokens": "gpt_neox.embed_in",
        "layer": "gpt_neox.layers.{i}",
        "attention_norm": "gpt_neox.layers.{i}.input_layernorm",
        "attention": "gpt_neox.layers.{i}.attention",
        "attention_out": "gpt_neox.layers.{i}.attention.dense",
        "value_projection": "gpt_neox.layers.{i}.attention.query_key_value",
        "mlp_norm": "gpt_neox.layers.{i}.post_attention_layernorm",
        "mlp": "gpt_neox.layers.{i}.mlp",
        "final_norm": "gpt_neox.final_layer_norm",
        "lm_head": ("lm_head", "embed_out"),  # embed_out before transformers 5
    },
    residual="parallel",
    values_layout="interleaved",
    final_norm_centers=True,
    when={"use_parallel_residual": True},
    description="Parallel block: layer_input + attention_output + mlp_output = layer_output; rotary positions.",
    part_notes={"mlp": "dense_h_to_4h widens each position (to 4 × the stream's width in Pythia), GELU, and "
                       "dense_4h_to_h projects back.",
                "attention": "The rotation turns only part of each head's dimensions (rotary_pct: a quarter in "
                             "Pythia)."},
)

GPT_NEOX_SEQUENTIAL = replace(GPT_NEOX, name="GPT-NeoX (sequential)", residual="sequential",
                              when={"use_parallel_residual": False},
                              description="GPT-NeoX with use_parallel_residual off: GPT-2's sequential block.")

FAMILIES = (GPT_NEOX, GPT_NEOX_SEQUENTIAL)
