"""The residual stream drawn as a spine left of the diagram's chain: the embeddings write it, every block reads it
and adds its output back at an ⊕ (two per sequential block, one per parallel block), and the final norm reads it."""

from __future__ import annotations

from math import pi

from bokeh.models import Label

from .diagram_parts import BOX_FILL, Part

SPINE_X = -1.35
SPINE_COLOR = "#777777"
PRESENTER_CHARACTER_PIXELS = 11.5  # a character's width at 20 px, the label's presenter size, with room to spare
LINE_PIXELS = 20  # blocks closer than this on screen show their ⊕ on the spine without read and write lines


def add_heights(block: Part, sequential: bool) -> list[float]:
    """Where a block's adds sit on the spine: attention's then the MLP's in a sequential block, one add otherwise."""
    return [block.y, block.y - block.height / 2] if sequential else [block.y - block.height / 4]


def draw_residual_spine(fig, parts: list[Part], sequential: bool, pixels_per_row: float) -> None:
    """The spine, a read line from it into each block, a write line from each block to its ⊕, and the labels saying
    what the spine and the ⊕ are (named glyphs ``residual_spine`` and ``residual_adds``); blocks too close for
    lines keep only their ⊕."""
    chain = [p for p in parts if p.kind.key in ("token_embeddings", "position_embeddings", "block", "final_norm")]
    blocks = [p for p in chain if p.kind.key == "block"]
    left = chain[0].x - chain[0].width / 2
    fig.segment([SPINE_X], [chain[0].y], [SPINE_X], [chain[-1].y], line_width=6, line_color=SPINE_COLOR,
                name="residual_spine")
    writers = [p for p in chain if p.kind.key.endswith("embeddings")]
    adds = [(block, y) for block in blocks for y in add_heights(block, sequential)]
    fig.segment([left] * len(writers), [p.y for p in writers], [SPINE_X] * len(writers), [p.y for p in writers],
                line_width=2, line_color=SPINE_COLOR)
    reads = [block.y + block.height / 2 * 0.9 for block in blocks] + [chain[-1].y]
    if blocks[0].height / BOX_FILL * pixels_per_row >= LINE_PIXELS:
        fig.segment([SPINE_X] * len(reads), reads, [left] * len(reads), reads, line_width=1.5,
                    line_color=SPINE_COLOR)
        fig.segment([left] * len(adds), [y for _, y in adds], [SPINE_X] * len(adds), [y for _, y in adds],
                    line_width=1.5, line_color="#333333")
    else:
        fig.segment([SPINE_X], [chain[-1].y], [left], [chain[-1].y], line_width=1.5, line_color=SPINE_COLOR)
    size = max(6.0, min(16.0, pixels_per_row * blocks[0].height / (2.2 if sequential else 1.2)))
    fig.scatter([SPINE_X] * len(adds), [y for _, y in adds], marker="circle_cross", size=size, fill_color="white",
                line_color="#333333", line_width=1.5, name="residual_adds")
    fig.add_layout(Label(x=SPINE_X - 0.2, y=(chain[0].y + chain[-1].y) / 2, angle=pi / 2, text_align="center",
                         text=spine_label((chain[0].y - chain[-1].y) * pixels_per_row), text_font_size="14px",
                         text_color="#444444", name="residual_spine_label"))


def spine_label(spine_pixels: float) -> str:
    """The spine's label, whole where it fits along the spine at presenter mode's 20 px, else its first words (a
    short model's spine is shorter than the sentence)."""
    whole = "residual stream · ⊕ a block adds its output"
    return whole if len(whole) * PRESENTER_CHARACTER_PIXELS <= spine_pixels else "residual stream"
