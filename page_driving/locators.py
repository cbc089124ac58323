"""Where things are on the served page: each tab's named figures, the prompt box, and how a script finds a figure's
BokehJS view by its name."""

from __future__ import annotations

FIGURES_BY_TAB = {
    "Block diagram": ("block_diagram",),
    "Norms & sinks": ("norms_heatmap", "norms_lines"),
    "Cosine similarity": ("similarity_across_layers", "similarity_within_layer", "laminar_profile"),
    "Logit lens": ("logit_lens", "lens_target"),
    "Logit attribution": ("logit_attribution",),
    "Attention": ("attention_pattern", "sink_share"),
    "Intervention": ("intervention",),
}
NORMS_TAB = "Norms & sinks"
PROMPT_BOX_PLACEHOLDER = "Type a prompt, press Enter"
PROMPT_BOX = f"input[placeholder='{PROMPT_BOX_PLACEHOLDER}']"

FIND_VIEW = """name => Bokeh.index.query_one(view => view.model.name === name)"""
