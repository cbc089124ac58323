"""The logit lens as a grid: one row per boundary, one column per position, each cell the top token coloured by
its probability, with the top-k on hover or click, a target token's probability and rank, and the readout check."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, LinearColorMapper, TapTool
from bokeh.palettes import Blues256

from model_backend.logit_lens import LogitLens
from model_backend.run import Run
from model_backend.tokens import visible_token

from .downloads import csv_download
from .state import ExplorerState
from .style import add_color_bar, readable_figure
from .tab_view import TabView

CELL_TEXT_CHARS = 8
VISIBLE_POSITIONS = 9


def lens_cells(lens: LogitLens, lens_tokens: np.ndarray) -> ColumnDataSource:
    """One row per cell: its boundary and position, the top token (whitespace visible) and the top-k for hovering."""
    n_rows, seq, k = lens.top_ids.shape
    rows, positions = np.meshgrid(np.arange(n_rows), np.arange(seq), indexing="ij")
    rows, positions = rows.ravel(), positions.ravel()

    def top_k(row, position):
        return "   ".join(f"{visible_token(lens_tokens[row, position, i])} {lens.top_probs[row, position, i]:.2f}"
                          for i in range(k))

    top = [visible_token(lens_tokens[r, p, 0]) for r, p in zip(rows, positions)]
    return ColumnDataSource({
        "row": [lens.row_labels[r] for r in rows], "position": positions, "top": top,
        "short": [t if len(t) <= CELL_TEXT_CHARS else t[:CELL_TEXT_CHARS - 1] + "…" for t in top],
        "prob": lens.top_probs[rows, positions, 0], "topk": [top_k(r, p) for r, p in zip(rows, positions)],
        "text_color": np.where(lens.top_probs[rows, positions, 0] > 0.55, "white", "black"),
    }, name="logit_lens_cells")


def lens_grid(run: Run, lens: LogitLens, lens_tokens: np.ndarray, on_select=None):
    """The grid figure (named ``logit_lens``): rows top to bottom from the embeddings to the model's readout."""
    cells = lens_cells(lens, lens_tokens)
    mapper = LinearColorMapper(palette=Blues256[::-1], low=0.0, high=1.0)
    height = min(640, 90 + 44 * lens.n_rows)
    fig = readable_figure(name="logit_lens", height=height, tools="save,reset,xpan,xwheel_zoom",
                          title=f"Logit lens{' (raw: no final norm)' if lens.raw else ''}: top token per boundary "
                                f"and position · {run.seq_len} tokens · drag sideways for more",
                          y_range=FactorRange(*reversed(lens.row_labels)),
                          x_range=(max(run.seq_len - VISIBLE_POSITIONS, 0) - 0.5, run.seq_len - 0.5),
                          x_axis_location="above")
    boxes = fig.rect("position", "row", 1, 1, source=cells, fill_color={"field": "prob", "transform": mapper},
                     line_color="white")
    fig.text("position", "row", text="short", source=cells, text_align="center", text_baseline="middle",
             text_font_size="14px", text_color="text_color")
    fig.add_tools(HoverTool(renderers=[boxes], tooltips=[("boundary", "@row"), ("position", "@position"),
                                                         ("top-k", "@topk")]),
                  TapTool(renderers=[boxes]))
    fig.xaxis.major_label_overrides = {p: f"{p}:{visible_token(t)}" for p, t in enumerate(run.tokens)}
    fig.xaxis.major_label_orientation = 0.6
    fig.xaxis.ticker = list(range(run.seq_len))
    add_color_bar(fig, mapper, "p(top)")
    if on_select is not None:
        cells.selected.on_change("indices", lambda _attr, _old, new: on_select(cells.data, new))
    return fig


def target_plot(lens: LogitLens, target_token: str, seq_len: int):
    """The target's probability and rank at the last position, one row per boundary as in the grid."""
    labels = lens.row_labels
    rows = FactorRange(*reversed(labels))
    token = visible_token(target_token)
    probability = readable_figure(name="lens_target", width=600, height=300, y_range=rows, x_axis_type="log",
                                  title=f"p({token}) at the end · {seq_len} tokens",
                                  tooltips=[("boundary", "@y"), ("p", "@x{0.0000}")])
    probability.line(lens.target_probs[:, -1], labels, line_width=3)
    probability.scatter(lens.target_probs[:, -1], labels, size=9)
    rank = readable_figure(width=360, height=300, y_range=rows, x_axis_type="log", title=f"rank of {token} (1 = top)",
                           tooltips=[("boundary", "@y"), ("rank", "@x")])
    rank.line(lens.target_ranks[:, -1], labels, line_width=3, color="#d62728")
    rank.scatter(lens.target_ranks[:, -1], labels, size=9, color="#d62728")
    rank.yaxis.visible = False
    return pn.Row(pn.pane.Bokeh(probability), pn.pane.Bokeh(rank))


def readout_check(lens: LogitLens) -> str:
    """The visible proof that the last row is the model's own output, or what the raw lens is instead."""
    if lens.raw:
        return ("<p class='lens-check'>Raw lens: each boundary goes straight into lm_head, without the final norm, "
                "so the last row is <b>not</b> the model's output.</p>")
    return (f"<p class='lens-check'>Check: the last row is the model's logits "
            f"(max |difference| = {lens.last_row_max_abs_diff:.2e}).</p>")


def lens_table(run: Run, lens: LogitLens, lens_tokens: np.ndarray) -> pd.DataFrame:
    """Top token and its probability per boundary and position, for the CSV download."""
    columns = {}
    for position, token in enumerate(run.tokens):
        columns[f"{position}:{token}"] = lens_tokens[:, position, 0]
        columns[f"{position}:p"] = lens.top_probs[:, position, 0]
    return pd.DataFrame(columns, index=lens.row_labels)


class LogitLensView(TabView):
    """Grid, readout check, target plots and a raw-lens switch for the state's lens."""

    def __init__(self, state: ExplorerState, **params):
        super().__init__(state=state, **params)
        self.selected = pn.pane.HTML("<p>Hover or click a cell to see its top-k.</p>", name="lens_selected")

    def show_selected(self, data, indices):
        """Write the clicked cell's top-k under the grid (escaped: tokens are user text)."""
        if indices:
            i = indices[0]
            self.selected.object = (f"<p class='lens-selected'><b>{html.escape(data['row'][i])}, position "
                                    f"{data['position'][i]}</b>: {html.escape(data['topk'][i])}</p>")

    @param.depends("state.lens", "state.lens_tokens", "state.shown_tab")
    def _grid(self):
        self.skip_while_hidden()
        run, lens, lens_tokens = self.state.run, self.state.lens, self.state.lens_tokens
        if run is None:
            return pn.pane.Markdown("Run a prompt to read the logit lens.")
        if lens is None:
            self.state.param.trigger("lens_requested")
            return pn.pane.Markdown("Reading every boundary through the unembedding…")
        parts = [pn.pane.HTML(readout_check(lens)), pn.pane.Bokeh(lens_grid(run, lens, lens_tokens,
                                                                             self.show_selected)), self.selected]
        if lens.target_probs is not None:
            parts.append(target_plot(lens, self.state.target, run.seq_len))
        parts.append(csv_download(lambda: lens_table(run, lens, lens_tokens), "logit_lens.csv",
                                  "Download the lens as CSV"))
        return pn.Column(*parts)

    def __panel__(self):
        return pn.Column(pn.Row(pn.widgets.TextInput.from_param(self.state.param.target, width=220),
                                pn.widgets.Checkbox.from_param(self.state.param.raw_lens)), self._grid)
