"""The logit lens as a grid: one row per boundary, one column per position, each cell the top token coloured by
its probability, with the top-k on hover or click, a target token's probability and rank, and the readout check."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import panel as pn
from bokeh.events import RangesUpdate
from bokeh.models import (ColumnDataSource, FactorRange, HoverTool, LinearAxis, LinearColorMapper, NumeralTickFormatter,
                          TapTool)
from bokeh.palettes import Blues256

from model_backend.run import Run
from model_backend.tokens import visible_token

from .downloads import csv_download
from .highlight import lens_boxes, marks_for, outside_labels, show_highlight
from .style import add_color_bar, readable_axes, readable_figure, show_ticks, token_axis_labels
from .tab_view import TabView
from .target_box import target_box

if TYPE_CHECKING:  # the lens module imports torch; the view only reads its arrays
    from model_backend.lens import LogitLens

CELL_TEXT_CHARS = 8
VISIBLE_POSITIONS = 9
ROW_PIXELS = {False: 44, True: 36}  # a row's height: normal mode squeezes a deep model into 640 pixels, presenter
# mode keeps every row legible and lets the page scroll to the rest
PRESENTER_FRAME_PIXELS = 260  # the title, the token names above and below the grid, and the marks' line
ROWS_AXIS_LABEL = "after block"  # the rows' full names ("block 29 → final norm (model output)") are in the hover


def short_row_label(row: int, n_rows: int, raw: bool) -> str:
    """A lens row's name on the grid's axis, short so that the cells get the width: "embed", the block's number,
    and "29 → out" for the last; the axis is named "after block" and the full names are in the hover."""
    if row == 0:
        return "embed"
    if row < n_rows - 1:
        return str(row - 1)
    return f"{row - 1} raw" if raw else f"{row - 1} → out"


def short_row_labels(lens: LogitLens) -> list[str]:
    return [short_row_label(row, lens.n_rows, lens.raw) for row in range(lens.n_rows)]


def lens_cells(lens: LogitLens, lens_tokens: np.ndarray, columns: np.ndarray | None = None) -> dict:
    """One entry per cell read so far (or in ``columns`` of ``lens.positions`` only): its boundary and position,
    the top token (whitespace visible) and the top-k for hovering; ``lens_tokens`` [row, read position, k]
    follows ``lens.positions``."""
    n_rows, n_read, k = lens.top_ids.shape
    rows, columns = np.meshgrid(np.arange(n_rows), np.arange(n_read) if columns is None else columns, indexing="ij")
    rows, columns = rows.ravel(), columns.ravel()
    visible = np.vectorize(visible_token, otypes=[object])(lens_tokens[rows, columns])  # [cell, k]
    probs = lens.top_probs[rows, columns]  # [cell, k]
    top = visible[:, 0]
    return {
        "row": np.array(lens.row_labels, dtype=object)[rows],
        "y": np.array(short_row_labels(lens), dtype=object)[rows], "position": lens.positions[columns], "top": top,
        "short": [t if len(t) <= CELL_TEXT_CHARS else t[:CELL_TEXT_CHARS - 1] + "…" for t in top],
        "prob": probs[:, 0],
        "topk": ["   ".join(f"{token} {p:.2f}" for token, p in zip(tokens, cell_probs))
                 for tokens, cell_probs in zip(visible, probs)],
        "text_color": np.where(probs[:, 0] > 0.55, "white", "black"),
    }


def shown_positions(start: float, end: float, seq_len: int) -> tuple[int, int]:
    """The first and last position whose cell (one unit wide, centred on the position) is in view: a cell that only
    touches the range's edge is not (the grid opens on exactly ``VISIBLE_POSITIONS`` cells, each read costs)."""
    return max(math.floor(start - 0.5) + 1, 0), min(math.ceil(end + 0.5) - 1, seq_len - 1)


def lens_grid(presenter: bool = False) -> tuple:
    """The empty grid figure (``logit_lens``), rows top to bottom from the embeddings to the model's readout; in
    presenter mode, where a deep model's grid is taller than the screen, the tokens name the columns below it too."""
    cells = ColumnDataSource({name: [] for name in ("row", "y", "position", "top", "short", "prob", "topk",
                                                    "text_color")}, name="logit_lens_cells")
    mapper = LinearColorMapper(palette=Blues256[::-1], low=0.0, high=1.0)
    fig = readable_figure(name="logit_lens", height=400, tools="save,reset,xpan,xwheel_zoom",
                          y_range=FactorRange(), x_range=(-0.5, 0.5), x_axis_location="above")
    if presenter:
        fig.add_layout(LinearAxis(), "below")
        readable_axes(fig)
    fig.yaxis.axis_label = ROWS_AXIS_LABEL
    outside_labels(fig)  # made with the figure: added to a figure on the page, BokehJS found no view for it
    boxes = fig.rect("position", "y", 1, 1, source=cells, fill_color={"field": "prob", "transform": mapper},
                     line_color="white", nonselection_fill_alpha=1.0, nonselection_line_alpha=1.0,
                     selection_line_color="#d62728", selection_line_width=3)  # a click outlines its cell only
    fig.text("position", "y", text="short", source=cells, text_align="center", text_baseline="middle",
             text_font_size="14px", text_color="text_color")
    fig.add_tools(HoverTool(renderers=[boxes], tooltips=[("boundary", "@row"), ("position", "@position"),
                                                         ("top-k", "@topk")]),
                  TapTool(renderers=[boxes]))
    fig.xaxis.major_label_orientation = 0.6
    add_color_bar(fig, mapper, "p(top)")
    return fig, cells


def target_plots() -> tuple:
    """Empty figures of the target's probability and rank at the last position, one row per boundary."""
    rows = FactorRange()
    probability = readable_figure(name="lens_target", height=300, y_range=rows, x_axis_type="log",
                                  tooltips=[("boundary", "@row"), ("p", "@x{0.0000}")])
    probabilities = ColumnDataSource({"x": [], "y": [], "row": []}, name="lens_target_probs")
    probability.line("x", "y", source=probabilities, line_width=3)
    probability.scatter("x", "y", source=probabilities, size=9)
    rank = readable_figure(height=300, y_range=rows, x_axis_type="log", tooltips=[("boundary", "@row"), ("rank", "@x")])
    ranks = ColumnDataSource({"x": [], "y": [], "row": []}, name="lens_target_ranks")
    rank.line("x", "y", source=ranks, line_width=3, color="#d62728")
    rank.scatter("x", "y", source=ranks, size=9, color="#d62728")
    rank.xaxis.formatter = NumeralTickFormatter(format="0,0")
    rank.xaxis.axis_label = "rank (log scale)"
    probability.xaxis.axis_label = "probability (log scale)"
    for fig in (probability, rank):
        fig.yaxis.axis_label = "after block"
    return probability, probabilities, rank, ranks


def readout_check(lens: LogitLens, seq_len: int) -> str:
    """The visible proof that the last row is the model's own output, or what the raw lens is instead, and how much
    of the grid is shown yet (positions read off screen are sent once the grid shows them or all are read)."""
    read = len(lens.positions)
    progress = "" if read == seq_len else (f" Shown so far: {read} of {seq_len} positions, those on screen first; "
                                           "drag the grid and the positions it shows come next.")
    if lens.raw:
        return ("<p class='lens-check'>Raw lens: each boundary goes straight into lm_head, without the final norm, "
                f"so the last row is <b>not</b> the model's output.{progress}</p>")
    difference = lens.last_row_max_abs_diff
    return (f"<p class='lens-check'>Check: the last row is the model's logits "
            f"(max |difference| = {difference:.2e}, over the {read} positions read).{progress}</p>")


def lens_table(run: Run, lens: LogitLens, lens_tokens: np.ndarray) -> pd.DataFrame:
    """Top token and its probability per boundary and position read, for the CSV download."""
    columns = {}
    for column, position in enumerate(lens.positions):
        columns[f"{position}:{run.tokens[position]}"] = lens_tokens[:, column, 0]
        columns[f"{position}:p"] = lens.top_probs[:, column, 0]
    return pd.DataFrame(columns, index=lens.row_labels)


def lens_target_label(match, lens: LogitLens) -> str:
    """The label of the token the lens followed (the match's, once the lens is read for it)."""
    return match.followed.labels[0] if match is not None and match.token_id == lens.target_id else str(lens.target_id)


class LogitLensView(TabView):
    """Grid, readout check, target plots and a raw-lens switch for the state's lens, updated as positions are read."""

    watches = ("run", "lens", "lens_tokens", "highlight")

    def build(self) -> None:
        self.grid, self.cells = lens_grid(self.state.presenter)
        self.cells.selected.on_change("indices", lambda _attr, _old, new: self.show_selected(new))
        self.grid.on_event(RangesUpdate, self.ask_for_shown_positions)
        self.probability, self.probabilities, self.rank, self.ranks = target_plots()
        self.check = pn.pane.HTML("Run a prompt to read the logit lens.")
        self.selected = pn.pane.HTML("<p>Hover or click a cell to see its top-k.</p>", name="lens_selected")
        self.targets = pn.Column(pn.pane.Bokeh(self.probability), pn.pane.Bokeh(self.rank), visible=False)
        self.download = csv_download(lambda: lens_table(self.state.run, self.state.lens, self.state.lens_tokens),
                                     "logit_lens.csv", "Download the lens shown so far as CSV")
        self.drawn: tuple = ((None, None), set())  # (run, (target, raw)) the cells belong to, their positions

    def show_selected(self, indices) -> None:
        """Write the clicked cell's top-k under the grid (escaped: tokens are user text)."""
        if indices:
            data, i = self.cells.data, indices[0]
            self.selected.object = (f"<p class='lens-selected'><b>{html.escape(data['row'][i])}, position "
                                    f"{data['position'][i]}</b>: {html.escape(data['topk'][i])}</p>")

    def ask_for_shown_positions(self, event: RangesUpdate) -> None:
        """After a drag or zoom, tell the state which positions the grid shows: they are read next."""
        run = self.state.run
        if run is not None and event.x0 is not None and event.x1 is not None:
            self.state.lens_window = shown_positions(event.x0, event.x1, run.seq_len)

    def refresh(self) -> None:
        run, lens, lens_tokens = self.state.run, self.state.lens, self.state.lens_tokens
        if run is None:
            return
        if lens is None or lens_tokens is None:
            self.check.object = "<p class='lens-check'>Reading every boundary through the unembedding…</p>"
            self.state.param.trigger("lens_requested")
            return
        self.show_grid(run, lens, lens_tokens)
        show_highlight(self.grid, lens_boxes(marks_for(self.state, "logit_lens"), short_row_labels(lens), run.seq_len),
                       labels_outside=True)
        self.check.object = readout_check(lens, run.seq_len)
        self.show_target(run, lens)

    def show_grid(self, run: Run, lens: LogitLens, lens_tokens: np.ndarray) -> None:
        opens = self.drawn[0][0] is not run  # a new run opens on its last positions; later reads keep the user's pan
        self.show_cells(run, lens, lens_tokens)
        self.grid.y_range.factors = list(reversed(short_row_labels(lens)))
        rows_height = ROW_PIXELS[self.state.presenter] * lens.n_rows
        self.grid.height = PRESENTER_FRAME_PIXELS + rows_height if self.state.presenter else min(640, 90 + rows_height)
        if opens:
            self.grid.x_range.update(start=max(run.seq_len - VISIBLE_POSITIONS, 0) - 0.5, end=run.seq_len - 0.5)
            self.grid.xaxis.major_label_overrides = token_axis_labels(run.tokens, written_from=run.generated_from)
            show_ticks(self.grid.xaxis, range(run.seq_len))
        more = " · drag for more" if run.seq_len > VISIBLE_POSITIONS else ""
        self.grid.title.text = (f"Logit lens{' (raw, no final norm)' if lens.raw else ''}: top token · "
                                f"{run.seq_len} tokens{more}")

    def show_cells(self, run: Run, lens: LogitLens, lens_tokens: np.ndarray) -> None:
        """Send the cells of positions read since the grid was last drawn for this lens (a lens grows a chunk at a
        time, and resending every cell would send the whole grid again per chunk), or all of a new lens's."""
        (drawn_run, drawn_reading), drawn_positions = self.drawn
        positions = set(lens.positions.tolist())
        if drawn_run is run and drawn_reading == (lens.target_id, lens.raw) and drawn_positions <= positions:
            fresh = np.flatnonzero(~np.isin(lens.positions, list(drawn_positions)))
            if fresh.size:
                self.cells.stream(lens_cells(lens, lens_tokens, fresh))
        else:
            self.cells.data = lens_cells(lens, lens_tokens)
        self.drawn = ((run, (lens.target_id, lens.raw)), positions)

    def show_target(self, run: Run, lens: LogitLens) -> None:
        """The target's probability and rank at the last position, hidden when no target is set."""
        self.targets.visible = lens.target_probs is not None
        if lens.target_probs is None:
            return
        labels = short_row_labels(lens)
        self.probability.y_range.factors = list(reversed(labels))
        self.probabilities.data = {"x": lens.target_probs[:, -1], "y": labels, "row": lens.row_labels}
        self.ranks.data = {"x": lens.target_ranks[:, -1], "y": labels, "row": lens.row_labels}
        token = visible_token(lens_target_label(self.state.target_match, lens))
        self.probability.title.text = f"p({token}) at the end · {run.seq_len} tokens"
        self.rank.title.text = f"rank of {token} (1 = top)"

    def layout(self):
        box, note = target_box(self.state)
        # The note beside the box and the check under the grid (it speaks of the grid's last row): on a projector's
        # first screen the grid then starts a few lines higher.
        choices = pn.Column(box, pn.widgets.Checkbox.from_param(self.state.param.raw_lens))
        return pn.Column(pn.Row(choices, note, sizing_mode="stretch_width"), pn.pane.Bokeh(self.grid), self.check,
                         self.selected, self.targets, self.download)
