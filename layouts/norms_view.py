"""Residual norm per position at every boundary, as a heatmap and as lines, with the sinks marked and explained."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.models import Label, LinearColorMapper, LogColorMapper, Span
from bokeh.palettes import Viridis256, viridis

from model_backend.boundaries import residual_boundaries
from model_backend.norms import SinkReport, residual_norms
from model_backend.run import Run
from model_backend.tokens import visible_token

from .downloads import csv_download
from .style import add_color_bar, readable_figure, token_axis_labels
from .tab_view import TabView


def norms_heatmap(run: Run, norms: np.ndarray, *, log_scale: bool, skip_first_in_colors: bool):
    """Boundaries × positions, coloured by norm; position 0 can be left out of the colour range (it saturates)."""
    labels = [label for label, _ in residual_boundaries(run)]
    scaled = norms[:, 1:] if skip_first_in_colors and norms.shape[1] > 1 else norms
    mapper_type = LogColorMapper if log_scale else LinearColorMapper
    mapper = mapper_type(palette=Viridis256, low=max(float(scaled.min()), 1e-6), high=float(scaled.max()),
                         high_color="#ff00ff")
    fig = readable_figure(name="norms_heatmap", height=300, x_range=(-0.5, run.seq_len - 0.5),
                          y_range=(-0.5, len(labels) - 0.5),
                          title=f"Residual norm per boundary and position · {run.seq_len} tokens"
                                + (" · magenta: above the range" if skip_first_in_colors else ""),
                          tooltips=[("position", "$x{0}"), ("norm", "@image{0.0}")])
    fig.image(image=[norms], x=-0.5, y=-0.5, dw=run.seq_len, dh=len(labels), color_mapper=mapper)
    fig.yaxis.ticker = list(range(len(labels)))
    fig.yaxis.major_label_overrides = dict(enumerate(labels))
    fig.xaxis.major_label_overrides = token_axis_labels(run.tokens)
    fig.xaxis.axis_label = "position"
    add_color_bar(fig, mapper, "norm")
    return fig


def norms_lines(run: Run, norms: np.ndarray, sinks: SinkReport, *, log_scale: bool):
    """One line per boundary, norm against position, with every sink marked and labelled by its signals."""
    labels = [label for label, _ in residual_boundaries(run)]
    fig = readable_figure(name="norms_lines", height=330, y_axis_type="log" if log_scale else "linear",
                          title=f"Residual norm per position, one line per boundary · {run.seq_len} tokens",
                          tooltips=[("boundary", "@boundary"), ("position", "$index"), ("norm", "@y{0.0}")])
    positions = np.arange(run.seq_len)
    for label, row, color in zip(labels, norms, viridis(len(labels))):
        fig.line("x", "y", line_color=color, line_width=2,
                 source={"x": positions, "y": row, "boundary": [label] * len(row)})
    for sink in sinks.sinks:
        fig.add_layout(Span(location=sink.position, dimension="height", line_color="#d62728", line_width=2))
        fig.add_layout(Label(x=sink.position, y=float(norms[:, sink.position].max()), x_offset=6, y_offset=-20,
                             text=f"sink {sink.position} {visible_token(sink.token)}: {sink.norm_ratio:.1f}× "
                                  f"[{', '.join(sink.signals)}]", text_font_size="15px", text_color="#d62728"))
    fig.xaxis.major_label_overrides = token_axis_labels(run.tokens)
    fig.xaxis.axis_label = "position"
    fig.yaxis.axis_label = "‖residual‖"
    return fig


def sink_summary(run: Run, sinks: SinkReport) -> str:
    """Plain words: which positions are sinks, their measured signals, or that none was found."""
    if not sinks.sinks:
        hint = (" This small demo model may not form one; GPT-2 shows a strong sink at position 0."
                if "demo" in run.model_name else "")
        return f"<p class='sink-summary'><b>No sink detected</b> in this run.{html.escape(hint)}</p>"
    rows = "".join(
        f"<tr><td>{s.position}</td><td><code>{html.escape(visible_token(s.token))}</code></td>"
        f"<td>{s.norm_ratio:.1f}×</td><td>{s.attention_share:.0%} ({s.layers_with_share}/{sinks.n_layers} layers)</td>"
        f"<td>{s.value_ratio:.2f}</td><td>{html.escape(', '.join(s.signals))}</td></tr>" for s in sinks.sinks)
    return ("<table class='sink-summary'><tr><th>position</th><th>token</th><th>norm ratio</th>"
            "<th>attention share</th><th>value ratio</th><th>signals fired</th></tr>" + rows + "</table>")


def norms_table(run: Run, norms: np.ndarray) -> pd.DataFrame:
    """Norms as a table for the CSV download: one row per boundary, one column per position."""
    columns = [f"{p}:{visible_token(t)}" for p, t in enumerate(run.tokens)]
    return pd.DataFrame(norms, index=[label for label, _ in residual_boundaries(run)], columns=columns)


class NormsView(TabView):
    """Heatmap, lines and sink table for the state's run, with log-scale and skip-position-0 switches."""

    log_scale = param.Boolean(default=False, label="log scale")
    skip_first_in_colors = param.Boolean(default=True, label="leave position 0 out of the colour scale")

    @param.depends("state.run", "log_scale", "skip_first_in_colors", "state.shown_tab")
    def _figures(self):
        self.skip_while_hidden()
        run, sinks = self.state.run, self.state.sinks
        if run is None:
            return pn.pane.Markdown("Run a prompt to see the residual norms.")
        norms = residual_norms(run)
        download = csv_download(lambda: norms_table(run, norms), "norms.csv", "Download norms as CSV")
        return pn.Column(pn.pane.HTML(sink_summary(run, sinks)),
                         pn.pane.Bokeh(norms_heatmap(run, norms, log_scale=self.log_scale,
                                                     skip_first_in_colors=self.skip_first_in_colors)),
                         pn.pane.Bokeh(norms_lines(run, norms, sinks, log_scale=self.log_scale)), download)

    def __panel__(self):
        return pn.Column(pn.Row(pn.widgets.Checkbox.from_param(self.param.log_scale),
                                pn.widgets.Checkbox.from_param(self.param.skip_first_in_colors)), self._figures)

