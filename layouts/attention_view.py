"""Attention: one block's pattern for a head (or the mean over heads), and how much attention lands on the sink
in every layer and head."""

from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import LinearColorMapper
from bokeh.palettes import Magma256

from model_backend.norms import attention_share_received
from model_backend.run import Run
from model_backend.tokens import visible_token

from .style import add_color_bar, readable_figure
from .tab_view import TabView

MEAN_OVER_HEADS = "mean over heads"


def pattern_heatmap(run: Run, pattern: np.ndarray, layer: int, head: int | None):
    """The [query, key] pattern as an image, query 0 at the top (figure ``attention_pattern``)."""
    matrix = pattern.mean(axis=0) if head is None else pattern[head]
    n = run.seq_len
    mapper = LinearColorMapper(palette=Magma256, low=0.0, high=float(matrix.max()) or 1.0)
    which = MEAN_OVER_HEADS if head is None else f"head {head}"
    fig = readable_figure(name="attention_pattern", width=560, height=500, x_range=(-0.5, n - 0.5),
                          y_range=(n - 0.5, -0.5), title=f"Block {layer}, {which} · {n} tokens",
                          tooltips=[("query", "$y{0}"), ("key", "$x{0}"), ("weight", "@image{0.000}")])
    fig.image(image=[matrix], x=-0.5, y=-0.5, dw=n, dh=n, color_mapper=mapper)
    labels = {p: f"{p}:{visible_token(t)}" for p, t in enumerate(run.tokens)}
    fig.xaxis.major_label_overrides = labels
    fig.yaxis.major_label_overrides = labels
    fig.xaxis.major_label_orientation = 0.9
    fig.xaxis.axis_label = "key"
    fig.yaxis.axis_label = "query"
    add_color_bar(fig, mapper, "weight")
    return fig


def sink_share_grid(run: Run, sink_position: int, is_detected_sink: bool):
    """Layer × head: the share of later queries' attention that lands on the sink (figure ``sink_share``)."""
    share = attention_share_received(run)[:, :, sink_position]  # [layer, head]
    mapper = LinearColorMapper(palette=Magma256, low=0.0, high=1.0)
    what = f"sink {sink_position}" if is_detected_sink else "pos 0 (no sink)"
    fig = readable_figure(name="sink_share", width=440, height=500, x_range=(-0.5, run.n_heads - 0.5),
                          y_range=(run.n_layers - 0.5, -0.5),
                          title=f"Share on {what} · {run.seq_len} tokens",
                          tooltips=[("layer", "$y{0}"), ("head", "$x{0}"), ("share", "@image{0.00}")])
    fig.image(image=[np.nan_to_num(share)], x=-0.5, y=-0.5, dw=run.n_heads, dh=run.n_layers, color_mapper=mapper)
    fig.xaxis.ticker = list(range(run.n_heads))
    fig.yaxis.ticker = list(range(run.n_layers))
    fig.xaxis.axis_label = "head"
    fig.yaxis.axis_label = "layer"
    add_color_bar(fig, mapper, "share")
    return fig


class AttentionView(TabView):
    """Pattern of the state's layer for a chosen head, beside the sink-share grid."""

    head = param.Selector(default=MEAN_OVER_HEADS, objects=[MEAN_OVER_HEADS], label="head")

    @param.depends("state.run", watch=True, on_init=True)
    def _offer_heads(self):
        heads = [] if self.state.run is None else list(range(self.state.run.n_heads))
        self.param.head.objects = [MEAN_OVER_HEADS, *heads]
        if self.head not in self.param.head.objects:
            self.head = MEAN_OVER_HEADS

    @param.depends("state.pattern", "head", "state.shown_tab")
    def _figures(self):
        self.skip_while_hidden()
        run, pattern = self.state.run, self.state.pattern
        if run is None or pattern is None:
            return pn.pane.Markdown("Run a prompt to see attention.")
        sinks = self.state.sinks.sink_positions if self.state.sinks is not None else []
        head = None if self.head == MEAN_OVER_HEADS else self.head
        layer = min(self.state.layer, run.n_layers - 1)
        return pn.Row(pn.pane.Bokeh(pattern_heatmap(run, pattern, layer, head)),
                      pn.pane.Bokeh(sink_share_grid(run, sinks[0] if sinks else 0, bool(sinks))))

    def __panel__(self):
        return pn.Column(pn.Row(pn.widgets.IntInput.from_param(self.state.param.layer, width=120),
                                pn.widgets.Select.from_param(self.param.head, width=220)), self._figures)
