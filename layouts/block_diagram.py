"""The block diagram: embeddings, N blocks, final norm and lm_head in a column, one block drawn open beside it.

Hovering a box names it and its module; clicking one calls ``on_pick`` with its id (the page pins its card).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import panel as pn
from bokeh.events import Tap
from bokeh.models import ColumnDataSource, HoverTool, Range1d, TapTool
from bokeh.palettes import Pastel1_9

from model_backend.families import Family
from model_backend.part_descriptions import PartDescription

from .diagram_parts import (FRAME_HEIGHT, FRAME_LEFT, FRAME_RIGHT, OPEN_BLOCK_GEOMETRY, STREAM_X, Part, diagram_parts,
                            open_block_top, part_at)
from .style import readable_figure

KIND_COLORS = {
    "token_embeddings": Pastel1_9[1], "position_embeddings": Pastel1_9[1], "block": Pastel1_9[8],
    "attention_norm": Pastel1_9[4], "mlp_norm": Pastel1_9[4], "final_norm": Pastel1_9[4],
    "attention": Pastel1_9[0], "mlp": Pastel1_9[2], "attention_add": Pastel1_9[5], "mlp_add": Pastel1_9[5],
    "lm_head": Pastel1_9[3],
}


def parts_source(parts: list[Part], family: Family, pinned: list[str], open_layer: int,
                 descriptions: dict[str, PartDescription]) -> ColumnDataSource:
    """One row per box: rectangle, label (the family's name for an open block's part), colour, module path and what
    the part does for the hover, and a thick edge when pinned."""
    def module_of(part: Part) -> str:
        return family.module_path(part.kind.role, part.layer) or "(none in this family)"

    def label_of(part: Part) -> str:
        described = descriptions.get(part.kind.key)
        return described.label if described is not None and part.kind.key in OPEN_BLOCK_GEOMETRY else part.label

    return ColumnDataSource({
        "x": [p.x for p in parts], "y": [p.y for p in parts],
        "width": [p.width for p in parts], "height": [p.height for p in parts],
        "label": [label_of(p) for p in parts], "part": [p.id for p in parts],
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
    has_positions = family.module_path("embed_positions") is not None
    parts = diagram_parts(n_layers, open_layer, has_positions)
    n_rows = n_layers + 3 + has_positions
    top = open_block_top(n_rows, open_layer + 1 + has_positions)
    bottom = min(-(n_rows - 1) - 0.6, top - FRAME_HEIGHT - 0.2)
    fig = readable_figure(name="block_diagram", width=520, height=560, tools="save",
                          title=f"{family.name} architecture, {n_layers} blocks · click a box for its card",
                          x_range=Range1d(-1.0, 6.3), y_range=Range1d(bottom, 0.9))
    fig.axis.visible = False
    fig.grid.visible = False
    fig.outline_line_color = None
    draw_open_block_frame(fig, parts, open_layer, top)
    source = parts_source(parts, family, list(pinned), open_layer, descriptions or {})
    boxes = fig.rect("x", "y", "width", "height", source=source, fill_color="color", line_color="#333333",
                     line_width="edge")
    fig.text("x", "y", text="label", source=source, text_align="center", text_baseline="middle",
             text_font_size="15px")
    fig.add_tools(HoverTool(renderers=[boxes], tooltips=[("part", "@label"), ("module", "@module"),
                                                         ("reads", "@reads"), ("what", "@what")]),
                  TapTool(renderers=[boxes], behavior="inspect"))
    if on_pick is not None:
        def pick(event):
            part = part_at(parts, event.x, event.y)
            if part is not None:
                # Redrawing the figure inside its own event callback would leave the new one deaf to taps.
                pn.state.execute(partial(on_pick, part.id), schedule=True)
        fig.on_event(Tap, pick)
    return fig


def draw_open_block_frame(fig, parts: list[Part], open_layer: int, top: float) -> None:
    """The open block's outline, its residual stream running down, and the two branches that add to it."""
    fig.quad(left=FRAME_LEFT, right=FRAME_RIGHT, top=top, bottom=top - FRAME_HEIGHT, fill_color="#f7f7f7",
             line_color="#555555", line_dash="dashed")
    fig.text([FRAME_LEFT + 0.1], [top - 0.05], text=[f"block {open_layer}, open"], text_baseline="top",
             text_font_size="15px", text_font_style="bold")
    chain_block = next(p for p in parts if p.id == f"block.{open_layer}")
    fig.segment([0.8, 0.8], [chain_block.y] * 2, [FRAME_LEFT] * 2, [top, top - FRAME_HEIGHT], line_color="#999999",
                line_dash="dotted")
    by_kind = {p.kind.key: p for p in parts if p.layer == open_layer and p.kind.key != "block"}
    fig.segment([STREAM_X], [top - 0.45], [STREAM_X], [top - FRAME_HEIGHT + 0.15], line_width=5, line_color="#777777")
    for norm, sublayer, add in (("attention_norm", "attention", "attention_add"), ("mlp_norm", "mlp", "mlp_add")):
        n, s, a = by_kind[norm], by_kind[sublayer], by_kind[add]
        fig.segment([STREAM_X, n.x, s.x - s.width / 2], [n.y, n.y - n.height / 2, s.y],
                    [n.x - n.width / 2, s.x, a.x + a.width / 2], [n.y, s.y + s.height / 2, a.y],
                    line_width=2, line_color="#777777")
