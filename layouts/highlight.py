"""The lesson's highlight on a figure: outlined boxes around the marks its text talks about, each with a label that
says what it is ("lesson: the sink"), drawn by Bokeh's own rect and text glyphs so categorical axes work too."""

from __future__ import annotations

from bokeh.models import ColumnDataSource, CustomJS, Title

from .scripts import script

HIGHLIGHT_COLOR = "#ff4500"
BRING_INTO_VIEW = script("bring_into_view.js")  # scrolls a new mark into view below the lesson panel
EMPTY = {"x": [], "y": [], "width": [], "height": [], "label": [], "at": [], "label_x": [], "label_y": [], "align": [],
         "shown": []}


def highlight_name(fig) -> str:
    return f"{fig.name}_lesson_highlight"


def highlight_renderer(fig):
    """The figure's highlight boxes, or None before the first highlight.

    Looked up among the figure's own renderers: Bokeh's ``select_one`` would walk every model the figure
    references at every refresh (``benchmarks/classroom_load.py`` measures the class it holds up).
    """
    name = highlight_name(fig)
    return next((renderer for renderer in fig.renderers if renderer.name == name), None)


def highlight_source(fig, scroll_to: bool) -> ColumnDataSource:
    """The source of the figure's highlight boxes, made the first time they are asked; ``scroll_to``: new marks
    scroll the page to show them."""
    name = highlight_name(fig)
    renderer = highlight_renderer(fig)
    if renderer is not None:
        return renderer.data_source
    source = ColumnDataSource(dict(EMPTY), name=f"{name}_data")
    boxes = fig.rect("x", "y", "width", "height", source=source, name=name, fill_alpha=0,
                     line_color=HIGHLIGHT_COLOR, line_width=4, line_dash="dashed")
    fig.text("label_x", "label_y", text="shown", source=source, name=f"{name}_label", text_align="align",
             text_baseline="middle", text_font_size="15px", text_font_style="bold", text_color=HIGHLIGHT_COLOR,
             background_fill_color="white", background_fill_alpha=0.85)
    if scroll_to:
        source.js_on_change("data", CustomJS(args={"source": source, "fig": fig, "renderer": boxes},
                                             code=BRING_INTO_VIEW))
    return source


def show_highlight(fig, boxes: list[dict], *, scroll_to: bool = True, middle: float | None = None,
                   labels_outside: bool = False) -> None:
    """Outline ``boxes`` (each: x, y, width, height in the figure's data coordinates, a label, and ``at``, the
    index the lesson marked) on ``fig``, scrolled into view unless ``scroll_to`` is false (a step's second figure);
    no boxes clears the highlight, and a figure never highlighted stays bare. With ``middle`` (the x axis's centre)
    a label runs from its box's edge towards the centre, so the frame never cuts it; ``labels_outside`` (a grid whose
    every cell is data) writes the labels in a line under the figure instead of on it."""
    if not boxes and highlight_renderer(fig) is None:
        return
    boxes = [{**label_place(box, middle), "shown": "" if labels_outside else box["label"], **box} for box in boxes]
    data = {key: [box[key] for box in boxes] for key in EMPTY}
    source = highlight_source(fig, scroll_to)
    if data != source.data:
        source.data = data
    if labels_outside:
        outside_labels(fig).text = outside_text([box["label"] for box in boxes])


def outside_text(labels: list[str]) -> str:
    """The marks' labels as one line: "lesson (dashed outlines): first top-1 · output row"."""
    named = [label.removeprefix("lesson: ") for label in labels if label]
    return f"lesson (dashed outlines): {' · '.join(named)}" if named else ""


def outside_labels(fig) -> Title:
    """The line under ``fig`` that names its marks, made the first time it is asked."""
    name = f"{highlight_name(fig)}_labels"
    line = next((item for item in fig.below if item.name == name), None)
    if line is None:
        line = Title(text="", name=name, text_color=HIGHLIGHT_COLOR, text_font_size="15px", text_font_style="bold")
        fig.add_layout(line, "below")
    return line


def label_place(box: dict, middle: float | None) -> dict:
    """Where a box's label starts: centred on it, or from the edge nearer the axis's ends towards ``middle``."""
    if middle is None:
        return {"label_x": box["x"], "label_y": box["y"], "align": "center"}
    inset = box["width"] / 2 - min(box["width"], 1) * 0.08  # clear of the frame's edge, which clips text
    if box["x"] <= middle:
        return {"label_x": box["x"] - inset, "label_y": box["y"], "align": "left"}
    return {"label_x": box["x"] + inset, "label_y": box["y"], "align": "right"}


def marks_for(state, figure_name: str) -> list[dict]:
    """The lesson's marks on one figure: each a dict with ``at`` (what it points at) and ``label``."""
    return state.highlight.get(figure_name, [])


def box(x, y, width, height, label: str, at) -> dict:
    return {"x": x, "y": y, "width": width, "height": height, "label": label, "at": at}


def column_boxes(marks: list[dict], n_rows: int, positions=None) -> list[dict]:
    """A whole column of a grid with ``n_rows`` unit rows per mark; ``positions``: the position each column shows
    (a mark on a position not shown is left out)."""
    columns = list(positions) if positions is not None else None
    return [box(m["at"] if columns is None else columns.index(m["at"]), (n_rows - 1) / 2, 1, n_rows, m["label"],
                m["at"]) for m in marks if columns is None or m["at"] in columns]


def row_and_column_boxes(marks: list[dict], positions) -> list[dict]:
    """A square matrix's row and column of each marked position (labelled once, on the column)."""
    n, boxes = len(positions), []
    for m in column_boxes(marks, len(positions), positions):
        boxes += [m, box((n - 1) / 2, m["x"], n, 1, "", m["at"])]
    return boxes


def span_boxes(marks: list[dict], low: float, high: float, width: float = 0.6) -> list[dict]:
    """A band at each marked position from ``low`` to ``high`` (a line plot's y extent)."""
    return [box(m["at"], (low + high) / 2, width, high - low, m["label"], m["at"]) for m in marks]


def first_row_boxes(marks: list[dict], position: int, n_columns: int) -> list[dict]:
    """Row 0 of a square matrix, when the matrix is of the marked position."""
    return [box((n_columns - 1) / 2, 0, n_columns, 1, m["label"], m["at"]) for m in marks if m["at"] == position]


def lens_boxes(marks: list[dict], row_labels: list[str], seq_len: int) -> list[dict]:
    """Lens marks (row, position): one cell, or with no position the whole row."""
    boxes = []
    for m in marks:
        row, position = m["at"]
        if position is None:
            boxes.append(box((seq_len - 1) / 2, row_labels[row], seq_len, 0.9, m["label"], list(m["at"])))
        else:
            boxes.append(box(position, row_labels[row], 0.9, 0.9, m["label"], list(m["at"])))
    return boxes


def bar_boxes(marks: list[dict], xs, widths, labels: list[str], terms) -> list[dict]:
    """Each marked bar (by its value's name) from 0 to its term, its label running from the bar towards the chart's
    centre; a bar not shown (another split) is left out."""
    index, boxes = {label: i for i, label in enumerate(labels)}, []
    for m in (m for m in marks if m["at"] in index):
        i = index[m["at"]]
        term = float(terms[i])
        boxes.append({**box(xs[i], term / 2, widths[i] * 1.2, abs(term) or 1e-6, m["label"], m["at"]),
                      "label_x": xs[i], "label_y": term / 2, "align": "left" if i < len(labels) / 2 else "right"})
    return boxes


def point_boxes(marks: list[dict], ys, height: float) -> list[dict]:
    """A box ``height`` tall around each marked point (x: its index) drawn so far."""
    return [box(m["at"], float(ys[m["at"]]), 0.8, height, m["label"], m["at"]) for m in marks if m["at"] < len(ys)]


def part_boxes(marks: list[dict], parts: dict) -> list[dict]:
    """The marked diagram parts (by id), a little larger than their boxes, labelled to their right one row up (on
    the box it would hide its name, level with it the open block's title)."""
    ids, boxes = list(parts["part"]), []
    for m in (m for m in marks if m["at"] in ids):
        i = ids.index(m["at"])
        outline = box(parts["x"][i], parts["y"][i], parts["width"][i] + 0.25, parts["height"][i] + 0.25, m["label"],
                      m["at"])
        boxes.append({**outline, "label_x": parts["x"][i] + outline["width"] / 2 + 0.05,
                      "label_y": parts["y"][i] + 0.8, "align": "left"})
    return boxes
