"""The block diagram: embeddings, N blocks, final norm, lm_head and logits in a column beside the residual stream's
spine (each block reads it and adds back at an ⊕), one block drawn open beside it.

Hovering a box names it and its module; clicking one calls ``on_pick`` with its id (the page pins its card).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import panel as pn
from bokeh.events import Tap
from bokeh.models import ColumnDataSource, CustomJS, HoverTool, Range1d, TapTool
from bokeh.palettes import Pastel1_9

from model_backend.families import Family
from model_backend.part_descriptions import PartDescription

from .diagram_parts import (FIRST_ROW, FRAME_LEFT, FRAME_RIGHT, OPEN_BLOCK_KINDS, STREAM_X, Part, block_pitch,
                            diagram_parts, frame_height, part_at)
from .diagram_spine import draw_residual_spine
from .scripts import script
from .style import readable_figure

OPEN_BLOCK_KEYS = frozenset(kind.key for kind in OPEN_BLOCK_KINDS)
KIND_COLORS = {
    "token_embeddings": Pastel1_9[1], "position_embeddings": Pastel1_9[1], "block": Pastel1_9[8],
    "attention_norm": Pastel1_9[4], "mlp_norm": Pastel1_9[4], "final_norm": Pastel1_9[4],
    "attention_post_norm": Pastel1_9[4], "mlp_post_norm": Pastel1_9[4],
    "attention": Pastel1_9[0], "mlp": Pastel1_9[2], "attention_add": Pastel1_9[5], "mlp_add": Pastel1_9[5],
    "lm_head": Pastel1_9[3], "logits": Pastel1_9[6],
}
SHOW_PINNED_CARD = script("show_pinned_card.js")  # after a click, the part's card scrolled into view
FIGURE_HEIGHT = 490
LABEL_PIXELS = 24  # the least room a block's label needs at presenter mode's 20 px; closer blocks are labelled every
# few (the hover names all)
LABEL_STEPS = (1, 2, 5, 10)


def label_step(n_layers: int, pixels_per_row: float) -> int:
    """Label every how many blocks of the chain: the first of 1, 2, 5, 10 that leaves each label its room."""
    block_pixels = block_pitch(n_layers) * pixels_per_row
    return next((step for step in LABEL_STEPS if step * block_pixels >= LABEL_PIXELS), LABEL_STEPS[-1])


def architecture_title(family: Family, n_layers: int) -> str:
    """The diagram's title: the model's architecture and block count, and what a click does."""
    return f"{family.name} architecture · {n_layers} blocks · click a box for its card"


def parts_source(parts: list[Part], family: Family, pinned: list[str], open_layer: int,
                 descriptions: dict[str, PartDescription], step: int = 1) -> ColumnDataSource:
    """One row per box: rectangle, label (the family's name for an open block's part; a chain block's every
    ``step`` blocks), colour, module path and what the part does for the hover, and a thick edge when pinned."""
    def module_of(part: Part) -> str:
        return family.module_path(part.kind.role, part.layer) or "(none in this family)"

    def name_of(part: Part) -> str:
        described = descriptions.get(part.kind.key)
        return described.label if described is not None and part.kind.key in OPEN_BLOCK_KEYS else part.label

    def label_of(part: Part) -> str:
        return "" if part.kind.key == "block" and part.layer % step else name_of(part)

    return ColumnDataSource({
        "x": [p.x for p in parts], "y": [p.y for p in parts],
        "width": [p.width for p in parts], "height": [p.height for p in parts],
        "label": [label_of(p) for p in parts], "name": [name_of(p) for p in parts], "part": [p.id for p in parts],
        "module": [module_of(p) for p in parts], "reads": [", ".join(p.full_names()) for p in parts],
        "what": [descriptions[p.kind.key].what if p.kind.key in descriptions else "" for p in parts],
        "color": [KIND_COLORS[p.kind.key] for p in parts],
        "edge": edge_widths([p.id for p in parts], pinned, open_layer),
    }, name="block_diagram_parts")


def edge_widths(part_ids: list[str], pinned: list[str], open_layer: int) -> list[float]:
    """Box outlines: thick for a pinned part, medium for the open block, thin otherwise."""
    return [4.0 if p in pinned else (2.5 if p == f"block.{open_layer}" else 1.0) for p in part_ids]


def block_diagram(family: Family, n_layers: int, open_layer: int, pinned: list[str] = (),
                  on_pick: Callable[[str], None] | None = None, descriptions: dict[str, PartDescription] | None = None):
    """The diagram as a Bokeh figure named ``block_diagram``; ``on_pick(part_id)`` runs on a click on a box;
    ``descriptions`` (by part kind) name the open block's parts and say what each does on hover."""
    parts = diagram_parts(family, n_layers, open_layer)
    height = frame_height(family)
    top = max(p.y for p in parts if p.kind.key in OPEN_BLOCK_KEYS) + FIRST_ROW
    chain_bottom = min(p.y for p in parts if p.kind.key not in OPEN_BLOCK_KEYS)
    bottom = min(chain_bottom - 0.6, top - height - 0.2)
    fig = readable_figure(name="block_diagram", width=520, height=FIGURE_HEIGHT, tools="save",
                          title=architecture_title(family, n_layers),
                          x_range=Range1d(-1.9, 6.3), y_range=Range1d(bottom, 0.9))
    fig.axis.visible = False
    fig.grid.visible = False
    fig.outline_line_color = None
    draw_open_block_frame(fig, parts, open_layer, top, height)
    pixels_per_row = (FIGURE_HEIGHT - 40) / (0.9 - bottom)
    draw_residual_spine(fig, parts, family.has_value("layer_mid"), pixels_per_row)
    source = parts_source(parts, family, list(pinned), open_layer, descriptions or {},
                          label_step(n_layers, pixels_per_row))
    boxes = fig.rect("x", "y", "width", "height", source=source, fill_color="color", line_color="#333333",
                     line_width="edge")
    fig.text("x", "y", text="label", source=source, text_align="center", text_baseline="middle",
             text_font_size="15px", background_fill_color="color", padding=1)
    draw_output_links(fig, parts)
    fig.add_tools(HoverTool(renderers=[boxes], tooltips=[("part", "@name"), ("module", "@module"),
                                                         ("reads", "@reads"), ("what", "@what")]),
                  TapTool(renderers=[boxes], behavior="inspect"))
    if on_pick is not None:
        def pick(event):
            part = part_at(parts, event.x, event.y)
            if part is not None:
                # Redrawing the figure inside its own event callback would leave the new one deaf to taps.
                pn.state.execute(partial(on_pick, part.id), schedule=True)
        fig.on_event(Tap, pick)
        fig.js_on_event(Tap, CustomJS(args={"source": source, "fig": fig}, code=SHOW_PINNED_CARD))
    return fig


def draw_output_links(fig, parts: list[Part]) -> None:
    """Lines from the final norm to lm_head to the logits: the stream's way out after the spine."""
    chain = [p for p in parts if p.kind.key in ("final_norm", "lm_head", "logits")]
    fig.segment([p.x for p in chain[:-1]], [p.y - p.height / 2 for p in chain[:-1]], [p.x for p in chain[1:]],
                [p.y + p.height / 2 for p in chain[1:]], line_width=2, line_color="#777777")


def draw_open_block_frame(fig, parts: list[Part], open_layer: int, top: float, height: float) -> None:
    """The open block's outline, its residual stream running down, and each sublayer's branch from the stream
    through its boxes to the add it writes to (both branches to the one add of a parallel block)."""
    fig.quad(left=FRAME_LEFT, right=FRAME_RIGHT, top=top, bottom=top - height, fill_color="#f7f7f7",
             line_color="#555555", line_dash="dashed")
    fig.text([FRAME_LEFT + 0.1], [top - 0.05], text=[f"block {open_layer}, open"], text_baseline="top",
             text_font_size="15px", text_font_style="bold")
    chain_block = next(p for p in parts if p.id == f"block.{open_layer}")
    fig.segment([0.8, 0.8], [chain_block.y] * 2, [FRAME_LEFT] * 2, [top, top - height], line_color="#999999",
                line_dash="dotted")
    by_kind = {p.kind.key: p for p in parts if p.layer == open_layer and p.kind.key != "block"}
    fig.segment([STREAM_X], [top - 0.45], [STREAM_X], [top - height + 0.15], line_width=5, line_color="#777777")
    for branch in ("attention", "mlp"):
        boxes = [by_kind[key] for key in (f"{branch}_norm", branch, f"{branch}_post_norm") if key in by_kind]
        add = by_kind.get(f"{branch}_add", by_kind["mlp_add"])
        first, last = boxes[0], boxes[-1]
        fig.segment([STREAM_X] + [b.x for b in boxes[:-1]] + [last.x - last.width / 2],
                    [first.y] + [b.y - b.height / 2 for b in boxes[:-1]] + [last.y],
                    [first.x - first.width / 2] + [b.x for b in boxes[1:]] + [add.x + add.width / 2],
                    [first.y] + [b.y + b.height / 2 for b in boxes[1:]] + [add.y],
                    line_width=2, line_color="#777777")
