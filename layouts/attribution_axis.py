"""Where the attribution's bars stand on a numeric block axis: block i's bars side by side around x = i, the
embeddings at x = -1 ("emb"), the final norm's bias after the last block ("norm"), and ticks every few blocks so the
labels stay apart from 6 to 48 blocks."""

from __future__ import annotations

from itertools import groupby

from bokeh.models import FixedTicker

from model_backend.names import FINAL_NORM_BIAS, parse_full_name

EMB_X = -1
GROUP_WIDTH = 0.84  # the share of its block's unit a group of bars fills
TICK_PIXELS = 48  # the least room one block label needs
TICK_STEPS = (1, 2, 5, 10, 20)


def group_of(label: str, n_layers: int) -> int:
    """The axis place of the group a bar belongs to: its block, EMB_X for the embeddings, n_layers for the bias."""
    if label == FINAL_NORM_BIAS:
        return n_layers
    value, layer, _ = parse_full_name(label)
    return EMB_X if layer is None or value.name == "layer_input" else layer


def bar_places(labels: list[str], n_layers: int) -> tuple[list[float], list[float]]:
    """Each bar's centre and width: a group's bars share GROUP_WIDTH of their block's unit, side by side in order."""
    xs, widths = [], []
    for group, members in groupby(labels, key=lambda label: group_of(label, n_layers)):
        count = len(list(members))
        slot = GROUP_WIDTH / count
        xs += [group - GROUP_WIDTH / 2 + slot * (i + 0.5) for i in range(count)]
        widths += [slot * 0.9] * count
    return xs, widths


def block_ticks(n_layers: int, plot_pixels: float, norm_bias: bool) -> list[int]:
    """Ticks at emb and every few blocks (the first step of 1, 2, 5, 10, 20 whose labels have room, block 0 only when
    every block is labelled), and at the final norm's bias if it has a bar; no two closer than a step."""
    pixels_per_block = plot_pixels / (n_layers + 2)
    step = next((step for step in TICK_STEPS if step * pixels_per_block >= TICK_PIXELS), TICK_STEPS[-1])
    last = n_layers - step if norm_bias else n_layers - 1
    return [EMB_X, *range(0 if step == 1 else step, last + 1, step), *([n_layers] if norm_bias else [])]


def block_ticker(n_layers: int, plot_pixels: float, norm_bias: bool) -> FixedTicker:
    """Bokeh's fixed ticker on ``block_ticks``, with a minor tick at every block."""
    return FixedTicker(ticks=block_ticks(n_layers, plot_pixels, norm_bias), minor_ticks=list(range(n_layers)))
