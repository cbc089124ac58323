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

from .heatmap import heatmap, show_cells
from .style import show_ticks, token_axis_labels
from .tab_view import TabView

MEAN_OVER_HEADS = "mean over heads"


def pattern_heatmap() -> tuple:
    """An empty [query, key] pattern image, query 0 at the top (figure ``attention_pattern``), and its source."""
    mapper = LinearColorMapper(palette=Magma256, low=0.0, high=1.0)
    return heatmap("attention_pattern", mapper, "weight / row max", rows_down=True, x_label="key", y_label="query",
                   slanted_x=True, width=560, height=500,
                   tooltips=[("query", "$y{0}"), ("key", "$x{0}"), ("weight / row max", "@image{0.000}")])


def per_query_scaled(pattern: np.ndarray) -> np.ndarray:
    """Each query's row divided by its largest weight: with 500 keys a row's weights are mostly near 1/500, which
    one colour scale for the whole pattern drew as black."""
    return pattern / np.maximum(pattern.max(axis=1, keepdims=True), 1e-12)


def sink_share_grid() -> tuple:
    """An empty layer × head grid of the share of later queries' attention on the sink (figure ``sink_share``)."""
    mapper = LinearColorMapper(palette=Magma256, low=0.0, high=1.0)
    return heatmap("sink_share", mapper, "share", rows_down=True, x_label="head", y_label="layer", width=440,
                   height=500, tooltips=[("layer", "$y{0}"), ("head", "$x{0}"), ("share", "@image{0.00}")])


class AttentionView(TabView):
    """Pattern of the state's layer for a chosen head, beside the sink-share grid; the pattern is recomputed
    only when this view is shown (it costs a block's attention)."""

    head = param.Selector(default=MEAN_OVER_HEADS, objects=[MEAN_OVER_HEADS], label="head")

    watches = ("run", "sinks", "pattern", "layer")
    own_watches = ("head",)

    def build(self) -> None:
        self.pattern_fig, self.pattern_image = pattern_heatmap()
        self.share_fig, self.share_image = sink_share_grid()
        self._offer_heads()
        self.state.param.watch(self._offer_heads, "run")
        self.state.param.watch(self._open_asked_head, "attention_head")
        self._open_asked_head()

    def _open_asked_head(self, *_events) -> None:
        """Open the head another view asked for (a click on an information-flow edge), if the run has it."""
        if self.state.attention_head in self.param.head.objects:
            self.head = self.state.attention_head

    def _offer_heads(self, *_events) -> None:
        heads = [] if self.state.run is None else list(range(self.state.run.n_heads))
        self.param.head.objects = [MEAN_OVER_HEADS, *heads]
        if self.head not in self.param.head.objects:
            self.head = MEAN_OVER_HEADS

    def refresh(self) -> None:
        run, sinks = self.state.run, self.state.sinks
        if run is None or sinks is None:
            return
        layer = min(self.state.layer, run.n_layers - 1)
        self.show_sink_share(run, sinks.sink_positions)
        if self.state.pattern is None or self.state.pattern_layer != layer:
            self.state.param.trigger("pattern_requested")
            return
        self.show_pattern(run, layer)

    def show_pattern(self, run: Run, layer: int) -> None:
        head = None if self.head == MEAN_OVER_HEADS else self.head
        pattern = self.state.pattern
        matrix = pattern.mean(axis=0) if head is None else pattern[head]
        n = run.seq_len
        show_cells(self.pattern_fig, self.pattern_image, per_query_scaled(matrix), rows_down=True)
        labels = token_axis_labels(run.tokens, written_from=run.generated_from)
        self.pattern_fig.xaxis.major_label_overrides = labels
        self.pattern_fig.yaxis.major_label_overrides = labels
        which = MEAN_OVER_HEADS if head is None else f"head {head}"
        self.pattern_fig.title.text = f"Block {layer}, {which} · {n} tokens"

    def show_sink_share(self, run: Run, sink_positions: list[int]) -> None:
        sink = sink_positions[0] if sink_positions else 0
        share = attention_share_received(run)[:, :, sink]  # [layer, head]
        show_cells(self.share_fig, self.share_image, np.nan_to_num(share), rows_down=True)
        show_ticks(self.share_fig.xaxis, range(run.n_heads))
        show_ticks(self.share_fig.yaxis, range(run.n_layers))
        what = f"sink {sink}" if sink_positions else "pos 0 (no sink)"
        self.share_fig.title.text = f"Share on {what} · {run.seq_len} tokens"

    def layout(self):
        return pn.Column(pn.FlexBox(pn.widgets.IntInput.from_param(self.state.param.layer, width=120),
                                    pn.widgets.Select.from_param(self.param.head, width=220)),
                         pn.FlexBox(pn.pane.Bokeh(self.pattern_fig), pn.pane.Bokeh(self.share_fig)),
                         sizing_mode="stretch_width")
