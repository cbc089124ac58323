"""Sizes and fonts that stay legible on a 1366×768 projector, applied the same way to every figure."""

from __future__ import annotations

from bokeh.models import ColorBar
from bokeh.plotting import figure

from model_backend.tokens import visible_token

TITLE_SIZE = "17px"
LABEL_SIZE = "15px"
TICK_SIZE = "14px"
WIDE = 960
TALL = 430
TOOLS = "pan,wheel_zoom,box_zoom,reset,save"


def readable_figure(**options) -> figure:
    """A Bokeh figure with big fonts and Bokeh's own save tool, sized for the page's main area."""
    options.setdefault("width", WIDE)
    options.setdefault("height", TALL)
    options.setdefault("tools", TOOLS)
    fig = figure(**options)
    fig.title.text_font_size = TITLE_SIZE
    for axis in (*fig.xaxis, *fig.yaxis):
        axis.axis_label_text_font_size = LABEL_SIZE
        axis.major_label_text_font_size = TICK_SIZE
    return fig


def add_color_bar(fig: figure, mapper, title: str) -> None:
    """A colour bar to the right of ``fig`` with big tick labels."""
    fig.add_layout(ColorBar(color_mapper=mapper, title=title, title_text_font_size=LABEL_SIZE,
                            major_label_text_font_size=TICK_SIZE, width=14), "right")


def token_axis_labels(tokens: list[str]) -> dict[int, str]:
    """Tick labels ``position: token`` for a positions axis (canvas text, so no HTML escaping is involved)."""
    return {position: f"{position}:{visible_token(token)}" for position, token in enumerate(tokens)}
