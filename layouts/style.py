"""Sizes and fonts that stay legible on a 1366×768 projector, applied the same way to every figure, and presenter
mode's larger ones for a 1024×768 projector's back row."""

from __future__ import annotations

import textwrap

import numpy as np
from bokeh.core.property.vectorization import Value
from bokeh.models import ColorBar, ColumnDataSource, FactorRange, FixedTicker, Label, NoOverlap, Text, Title
from bokeh.plotting import figure

from model_backend.tokens import visible_token

TITLE_SIZE = "17px"
LABEL_SIZE = "15px"
TICK_SIZE = "14px"
PRESENTER_TITLE_SIZE = "24px"
PRESENTER_LABEL_SIZE = "20px"
PRESENTER_LINE_WIDTH = 4
PRESENTER_TITLE_CHAR = 12  # pixels a character of a bold 24 px title takes, on average (a title is mostly lowercase)
PRESENTER_TICK_CHAR = 9  # the same for a 20 px tick label
PRESENTER_MAIN_WIDTH = 940  # a stretched figure's width at 1024x768 in presenter mode, the sidebar folded away
WIDE = 960
NARROW = 480
TALL = 430
TOOLS = "pan,wheel_zoom,box_zoom,reset,save"


def readable_figure(**options) -> figure:
    """A Bokeh figure with big fonts and Bokeh's own save tool, sized for the page's main area: without a width of
    its own it takes the area's width (about 660 pixels beside the sidebar at 1024×768), so the page never scrolls
    sideways. Each axis draws only the tick labels that have room (Bokeh's overlap policy, measured in the browser at
    the size the labels are drawn): 30 blocks or a long prompt at a projector's font stay readable."""
    if "width" not in options:
        options.setdefault("sizing_mode", "stretch_width")
        options.setdefault("min_width", NARROW)
    options.setdefault("height", TALL)
    options.setdefault("tools", TOOLS)
    fig = figure(**options)
    fig.title.text_font_size = TITLE_SIZE
    readable_axes(fig)
    return fig


def readable_axes(fig) -> None:
    """Every axis of ``fig`` with the page's fonts, drawing only the tick labels that have room (an axis added after
    the figure was made needs this too)."""
    for axis in (*fig.xaxis, *fig.yaxis):
        axis.axis_label_text_font_size = LABEL_SIZE
        axis.major_label_text_font_size = TICK_SIZE
        axis.major_label_policy = NoOverlap(min_distance=6)


def enlarge_for_projector(fig) -> None:
    """Presenter mode: every text of the figure at least the projector's size (titles bigger, wrapped to the figure's
    width at 1024x768; axis names, tick labels, legends, colour bars, notes and text glyphs such as the lens's cells
    and the diagram's labels) and thicker lines, readable from a classroom's back row (setting the same sizes again
    sends nothing)."""
    fig.title.text_font_size = PRESENTER_TITLE_SIZE
    fig.title.text = title_lines(fig.title.text, presenter_title_characters(fig))
    for axis in (*fig.xaxis, *fig.yaxis):
        axis.axis_label_text_font_size = PRESENTER_LABEL_SIZE
        axis.major_label_text_font_size = PRESENTER_LABEL_SIZE
    for legend in fig.legend:
        legend.label_text_font_size = PRESENTER_LABEL_SIZE
    for item in (*fig.above, *fig.below, *fig.right, *fig.left):
        if isinstance(item, ColorBar):
            item.title_text_font_size = at_least(item.title_text_font_size, PRESENTER_LABEL_SIZE)
            item.major_label_text_font_size = at_least(item.major_label_text_font_size, PRESENTER_LABEL_SIZE)
        elif isinstance(item, Title) and item is not fig.title:
            item.text_font_size = at_least(item.text_font_size, PRESENTER_LABEL_SIZE)
    for item in fig.center:
        if isinstance(item, Label):
            item.text_font_size = at_least(item.text_font_size, PRESENTER_LABEL_SIZE)
    for renderer in fig.renderers:
        glyph = getattr(renderer, "glyph", None)
        if isinstance(glyph, Text):
            glyph.text_font_size = at_least(glyph.text_font_size, PRESENTER_LABEL_SIZE)
        elif hasattr(glyph, "line_width") and isinstance(glyph.line_width, (int, float)):
            glyph.line_width = max(glyph.line_width, PRESENTER_LINE_WIDTH)


def at_least(size, least: str) -> str:
    """A font size (a CSS pixel size, or Bokeh's value of one) no smaller than ``least``; other units are kept."""
    text = size.value if isinstance(size, Value) else size
    if isinstance(text, str) and text.endswith("px") and float(text[:-2]) < float(least[:-2]):
        return least
    return text


def presenter_title_characters(fig) -> int:
    """How many characters of a presenter title fit on one line: a title starts where the plot does, after the left
    axis's widest tick label and its name, and may run to the figure's right edge."""
    axes = [axis for axis in fig.yaxis if axis.visible]
    labels = [str(label) for axis in axes for label in axis.major_label_overrides.values()]
    if axes and isinstance(fig.y_range, FactorRange):
        labels += [str(factor) for factor in fig.y_range.factors]
    left = (max(map(len, labels), default=6) * PRESENTER_TICK_CHAR + 50) if axes else 10
    width = fig.width if fig.sizing_mode is None else PRESENTER_MAIN_WIDTH
    return max((width - left) // PRESENTER_TITLE_CHAR, 12)


def title_lines(text: str, characters: int) -> str:
    """``text`` on lines of at most ``characters`` (Bokeh does not wrap a title): broken at its " · " where it can,
    else between words; a line that fits is kept, so wrapping twice changes nothing."""
    lines = []
    for given in text.split("\n"):
        line = ""
        for part in given.split(" · "):
            if line and len(line) + 3 + len(part) <= characters:
                line += " · " + part
            else:
                if line:
                    lines.append(line)
                *whole, line = textwrap.wrap(part, characters) or [""]
                lines += whole
        lines.append(line)
    return "\n".join(lines)


def add_color_bar(fig: figure, mapper, title: str) -> None:
    """A colour bar to the right of ``fig`` with big tick labels."""
    fig.add_layout(ColorBar(color_mapper=mapper, title=title, title_text_font_size=LABEL_SIZE,
                            major_label_text_font_size=TICK_SIZE, width=14), "right")


WRITTEN_MARK = "»"  # before a token the model wrote itself (Write), on every token axis


def token_axis_labels(tokens: list[str], positions=None, written_from: int | None = None) -> dict[int, str]:
    """Tick labels ``position: token`` for a positions axis (canvas text, so no HTML escaping is involved), at every
    position or only at ``positions`` (an axis whose ticks stay there: the other labels would never show); the
    positions from ``written_from`` on, which the model wrote, carry ``WRITTEN_MARK``."""
    shown = range(len(tokens)) if positions is None else positions
    return {position: f"{position}:{WRITTEN_MARK if written_from is not None and position >= written_from else ''}"
                      f"{visible_token(tokens[position])}" for position in shown}


def show_ticks(axes, ticks) -> None:
    """Ticks at exactly ``ticks`` on each of ``axes``, changing the list of the axis's one ticker in place: a new
    ticker model per run would make Bokeh walk the session's whole document again."""
    for axis in axes:
        if isinstance(axis.ticker, FixedTicker):
            axis.ticker.ticks = list(ticks)
        else:
            axis.ticker = FixedTicker(ticks=list(ticks))


def spaced_ticks(n: int, most: int = 16) -> range:
    """Every k-th of ``n`` cells, k chosen so that at most about ``most`` labels share an axis (a 30-block model's
    31 boundary names overlapped on a 300-pixel axis)."""
    return range(0, n, -(-n // most))


def image_source(fig: figure, mapper, *, x: float = -0.5, y: float = -0.5, name: str | None = None) -> ColumnDataSource:
    """An image glyph on ``fig`` whose matrix and size live in one source, so a run swaps the data in place."""
    source = ColumnDataSource({"image": [np.zeros((1, 1))], "dw": [1], "dh": [1]}, name=name)
    fig.image(image="image", x=x, y=y, dw="dw", dh="dh", source=source, color_mapper=mapper)
    return source


def show_matrix(source: ColumnDataSource, matrix: np.ndarray) -> None:
    """Draw ``matrix`` [rows, columns] in an ``image_source``: one cell per entry."""
    source.data = {"image": [matrix.astype(np.float32)], "dw": [matrix.shape[1]], "dh": [matrix.shape[0]]}


def cells_range(fig_range, n: int, *, flipped: bool = False) -> None:
    """Fit a numeric range to ``n`` unit cells centred on 0..n-1 (``flipped``: 0 at the top)."""
    start, end = -0.5, n - 0.5
    fig_range.update(start=end if flipped else start, end=start if flipped else end)
