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
    "Patching": ("patching_layer_output", "patching_attention_output", "patching_mlp_output"),
}
NORMS_TAB = "Norms & sinks"
STILL_FILLING = ("so far", "not patched yet")  # words in a figure's title while its view still streams its rows
PROMPT_BOX_PLACEHOLDER = "Type a prompt, press Enter"
PROMPT_BOX = f"input[placeholder='{PROMPT_BOX_PLACEHOLDER}']"
TARGET_BOX_PLACEHOLDER = "a word, e.g. London (empty: top prediction)"  # one box in each tab that follows a target
TARGET_BOX = f"input[placeholder='{TARGET_BOX_PLACEHOLDER}']"

FIND_VIEW = """name => Bokeh.index.query_one(view => view.model.name === name)"""
# The tick labels of a named figure's token axis ("0:<|endoftext|>", "1:The", …), in position order.
AXIS_LABELS = f"""name => {{
    const view = ({FIND_VIEW})(name);
    const labels = view.model.below.find(axis => axis.major_label_overrides).major_label_overrides;
    const entries = labels instanceof Map ? [...labels.entries()] : Object.entries(labels);
    return entries.sort((a, b) => Number(a[0]) - Number(b[0])).map(([, text]) => String(text));
}}"""
