"""Residual norm per position at every boundary, as a heatmap and as lines, with the sinks marked and explained."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.models import ColumnDataSource, LinearColorMapper, LogColorMapper
from bokeh.palettes import Viridis256, viridis

from model_backend.boundaries import residual_boundaries
from model_backend.norms import (ATTENTION_SHARE_THRESHOLD, NORM_RATIO_THRESHOLD, VALUE_RATIO_THRESHOLD, SinkReport,
                                 middle_layers)
from model_backend.run import Run
from model_backend.tokens import visible_token

from .downloads import csv_download
from .heatmap import heatmap, show_cells
from .highlight import column_boxes, marks_for, show_highlight, span_boxes
from .norms_comparison import NormsComparisonView, shared_color_range
from .style import add_color_bar, readable_figure, show_ticks, spaced_ticks, token_axis_labels
from .tab_view import TabView


def norms_heatmap(mapper) -> tuple:
    """An empty boundaries × positions heatmap (figure ``norms_heatmap``) and its image source."""
    return heatmap("norms_heatmap", mapper, "norm", tooltips=[("position", "$x{0}"), ("norm", "@image{0.0}")],
                   x_label="position", height=300)


def norms_lines(*, log_scale: bool) -> tuple:
    """An empty norm-against-position figure (``norms_lines``): one line per boundary, sinks marked in red."""
    fig = readable_figure(name="norms_lines", height=330, y_axis_type="log" if log_scale else "linear",
                          tooltips=[("boundary", "@boundary"), ("position", "$x{0}"), ("norm", "$y{0.0}")])
    lines = ColumnDataSource({"xs": [], "ys": [], "boundary": [], "color": []}, name="norms_lines_data")
    fig.multi_line("xs", "ys", source=lines, line_color="color", line_width=2)
    sinks = ColumnDataSource({"position": [], "top": [], "label": []}, name="norms_sinks")
    fig.vspan(x="position", source=sinks, line_color="#d62728", line_width=2)
    fig.text("position", "top", text="label", source=sinks, x_offset=6, y_offset=20, text_font_size="15px",
             text_color="#d62728")
    fig.xaxis.axis_label = "position"
    fig.yaxis.axis_label = "‖residual‖"
    boundaries = LinearColorMapper(palette=Viridis256, low=0, high=1)
    add_color_bar(fig, boundaries, "boundary (0 = embeddings)")  # short: it stands along the plot's height
    return fig, lines, sinks, boundaries


def sink_labels(sinks: SinkReport, norms: np.ndarray) -> dict:
    """Where each sink's marker and label go: its position, the top of its norms, its ratio and signals."""
    return {"position": [s.position for s in sinks.sinks],
            "top": [float(norms[:, s.position].max()) for s in sinks.sinks],
            "label": [f"sink {s.position} {visible_token(s.token)}: {s.norm_ratio:.1f}× [{', '.join(s.signals)}]"
                      for s in sinks.sinks]}


def sink_summary(run: Run, sinks: SinkReport) -> str:
    """Plain words: which positions are sinks, their measured signals, or that none was found."""
    if not sinks.sinks:
        hint = (" demo-gpt2 is too small to have formed one: published work sees sinks form after about a billion "
                "training tokens, and it saw five million. Switch to SmolLM2-135M-Instruct (or GPT-2) to see a sink at "
                "position 0." if "demo" in run.model_name else "")
        return f"<p class='sink-summary'><b>No sink detected</b> in this run.{html.escape(hint)}</p>"
    rows = "".join(
        f"<tr><td>{s.position}</td><td><code>{html.escape(visible_token(s.token))}</code></td>"
        f"<td>{s.norm_ratio:.1f}×</td><td>{s.attention_share:.0%} ({s.layers_with_share}/{sinks.n_layers} layers)</td>"
        f"<td>{s.value_ratio:.2f}</td><td>{html.escape(', '.join(s.signals))}</td></tr>" for s in sinks.sinks)
    return ("<table class='sink-summary'><tr><th>position</th><th>token</th><th>norm ratio</th>"
            "<th>attention share</th><th>value ratio</th><th>signals fired</th></tr>" + rows + "</table>"
            + sink_columns_explained(sinks.n_layers))


def sink_columns_explained(n_layers: int) -> str:
    """What each column of the sink table measures and the threshold at which its signal fires, folded under one
    line: open, it pushes the heatmap below a projector's screen."""
    middle = middle_layers(n_layers)
    return (f"<details class='sink-columns'><summary>What the columns measure, and when a signal fires</summary>"
            f"<b>norm ratio</b>: the position's residual norm over the median of the other "
            f"positions', median over blocks {middle.start}-{middle.stop - 1} (fires at ≥ {NORM_RATIO_THRESHOLD:g}×). "
            f"<b>attention share</b>: the share of later tokens' attention landing on it, mean over heads, median over "
            f"blocks; in brackets the blocks where it reaches {ATTENTION_SHARE_THRESHOLD:.0%} (fires in half of them "
            f"or more). <b>value ratio</b>: its value vector's norm over the others', in the heads that attend to it "
            f"(fires at ≤ {VALUE_RATIO_THRESHOLD:g}: much attention, little written).</details>")


def norms_table(run: Run, norms: np.ndarray) -> pd.DataFrame:
    """Norms as a table for the CSV download: one row per boundary, one column per position."""
    columns = [f"{p}:{visible_token(t)}" for p, t in enumerate(run.tokens)]
    return pd.DataFrame(norms, index=[label for label, _ in residual_boundaries(run)], columns=columns)


class NormsView(TabView):
    """Heatmap, lines and sink table for the state's run, with log-scale and skip-position-0 switches."""

    log_scale = param.Boolean(default=False, label="log scale")
    skip_first_in_colors = param.Boolean(default=True, label="leave position 0 out of the colour scale")

    watches = ("run", "sinks", "highlight")
    own_watches = ("skip_first_in_colors",)

    def build(self) -> None:
        self.norms = None
        self.summary = pn.pane.HTML("Run a prompt to see the residual norms.")
        self.linear_mapper = LinearColorMapper(palette=Viridis256, high_color="#ff00ff")
        self.log_mapper = LogColorMapper(palette=Viridis256, high_color="#ff00ff")
        self.heatmap_pane, self.lines_pane = pn.pane.Bokeh(), pn.pane.Bokeh()
        self.download = csv_download(lambda: norms_table(self.state.run, self.norms), "norms.csv",
                                     "Download norms as CSV")
        self.comparison = NormsComparisonView(self.state, tab=self.tab)
        self.make_figures()
        self.heatmap_pane.object, self.lines_pane.object = self.heatmap, self.lines
        self.param.watch(self._change_axis_type, "log_scale")

    def make_figures(self) -> None:
        """Make the figures for the current axis type (the only change that needs new figures)."""
        mapper = self.log_mapper if self.log_scale else self.linear_mapper
        self.heatmap, self.heatmap_image = norms_heatmap(mapper)
        self.lines, self.lines_data, self.sink_marks, self.line_colors = norms_lines(log_scale=self.log_scale)

    def _change_axis_type(self, *_events) -> None:
        """New figures, filled before they replace the shown ones (so they reach the page with their data)."""
        self.make_figures()
        self.refresh()
        self.heatmap_pane.object, self.lines_pane.object = self.heatmap, self.lines

    def refresh(self) -> None:
        run, sinks = self.state.run, self.state.sinks
        if run is None or sinks is None:
            return
        self.norms = norms = sinks.residual_norms  # computed with the sinks, on the model thread
        labels = [label for label, _ in residual_boundaries(run)]
        n = run.seq_len
        low, high = shared_color_range([norms], self.skip_first_in_colors)
        for mapper in (self.linear_mapper, self.log_mapper):
            mapper.update(low=low, high=high)
        show_cells(self.heatmap, self.heatmap_image, norms)
        show_ticks(self.heatmap.yaxis, spaced_ticks(len(labels)))
        self.heatmap.yaxis.major_label_overrides = dict(enumerate(labels))
        self.heatmap.xaxis.major_label_overrides = token_axis_labels(run.tokens, written_from=run.generated_from)
        above_range = self.skip_first_in_colors and n > 1 and norms[:, 0].max() > high
        self.heatmap.title.text = (f"Residual norm · {n} tokens"
                                   + (" · magenta: above the colour range" if above_range else ""))
        positions = np.arange(n, dtype=np.int32)  # sent as it is: Bokeh would check int64 for each line
        self.lines_data.data = {"xs": [positions] * len(labels), "ys": list(norms), "boundary": labels,
                                "color": viridis(len(labels))}
        self.sink_marks.data = sink_labels(sinks, norms)
        ticks = spaced_ticks(n)  # whole positions only: a tick between two read as a token
        self.lines.xaxis.major_label_overrides = token_axis_labels(run.tokens, ticks, written_from=run.generated_from)
        show_ticks(self.lines.xaxis, ticks)
        self.line_colors.high = len(labels) - 1
        self.lines.title.text = f"Norm per position, one line per boundary · {n} tokens"
        self.summary.object = sink_summary(run, sinks)
        show_highlight(self.heatmap, column_boxes(marks_for(self.state, "norms_heatmap"), len(labels)),
                       middle=(n - 1) / 2)
        show_highlight(self.lines, span_boxes(marks_for(self.state, "norms_lines"), float(norms.min()),
                                              float(norms.max())), scroll_to=False, middle=(n - 1) / 2)

    def layout(self):
        return pn.Column(pn.FlexBox(pn.widgets.Checkbox.from_param(self.param.log_scale),
                                pn.widgets.Checkbox.from_param(self.param.skip_first_in_colors),
                                self.comparison.selector, align_items="center"),
                         self.summary, self.comparison, self.heatmap_pane, self.lines_pane, self.download)
