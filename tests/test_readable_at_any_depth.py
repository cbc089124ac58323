"""The diagram and the attribution chart stay readable from 6 to 48 blocks: block labels and ticks keep their room,
every bar stands inside its block's unit, and the diagram draws its spine, its ⊕ and its logits box."""

from __future__ import annotations

import pytest

from layouts.attribution_axis import TICK_PIXELS, bar_places, block_ticks
from layouts.attribution_view import PLOT_PIXELS
from layouts.block_diagram import LABEL_PIXELS, block_diagram
from layouts.diagram_parts import block_pitch
from model_backend.families import FAMILIES
from model_backend.names import FINAL_NORM_BIAS, full_name

BY_NAME = {family.name: family for family in FAMILIES}


@pytest.mark.parametrize("n_layers", [6, 12, 30, 48])
def test_attribution_ticks_have_room_and_bars_stay_in_their_block(n_layers):
    ticks = block_ticks(n_layers, PLOT_PIXELS, norm_bias=True)
    assert ticks[0] == -1 and ticks[-1] == n_layers and len(ticks) >= 4
    assert min(b - a for a, b in zip(ticks, ticks[1:])) * PLOT_PIXELS / (n_layers + 2) >= TICK_PIXELS * 0.99
    labels = ["token_embeddings", "position_embeddings"]
    for layer in range(n_layers):
        labels += [full_name("attention_output", layer, f"head_{h}") for h in range(12)]
        labels += [full_name("mlp_output", layer)]
    xs, widths = bar_places([*labels, FINAL_NORM_BIAS], n_layers)
    assert xs == sorted(xs) and all(w > 0 for w in widths)
    assert all(-0.5 < x - layer < 0.5 for x, layer in zip(xs[2:-1], [i for i in range(n_layers) for _ in range(13)]))


@pytest.mark.parametrize(("family", "n_layers", "adds"), [("GPT-2", 6, 2), ("Llama", 30, 2), ("Llama", 48, 2),
                                                          ("GPT-NeoX", 6, 1)])
def test_the_diagram_has_a_spine_an_add_per_sublayer_add_and_a_logits_box(family, n_layers, adds):
    fig = block_diagram(BY_NAME[family], n_layers, open_layer=n_layers - 1)
    assert fig.title.text.startswith(f"{family} architecture · {n_layers} blocks")
    assert fig.select_one({"name": "residual_spine"}) is not None
    assert len(fig.select_one({"name": "residual_adds"}).data_source.data["x"]) == adds * n_layers
    parts = fig.select_one({"name": "block_diagram_parts"}).data
    assert "logits" in parts["part"] and parts["part"].index("logits") == parts["part"].index("lm_head") + 1
    labelled = [int(label.split()[1]) for label, part in zip(parts["label"], parts["part"])
                if part.startswith("block.") and label]
    pixels_per_row = (fig.height - 40) / (fig.y_range.end - fig.y_range.start)
    gap = min(b - a for a, b in zip(labelled, labelled[1:]))
    assert gap * block_pitch(n_layers) * pixels_per_row >= LABEL_PIXELS
