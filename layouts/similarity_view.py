"""Cosine similarity three ways: one token across boundaries, all tokens within a boundary, and every token pair at
every boundary (the laminar profile). Each heatmap has a colour bar and a slider for its lower bound."""

from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import LinearColorMapper
from bokeh.palettes import Viridis256

from model_backend.run import Run
from model_backend.similarity import laminar_profile, token_across_layers, tokens_within_layer
from model_backend.tokens import visible_token

from .style import add_color_bar, readable_figure
from .tab_view import TabView

MAX_PAIRS_DRAWN = 3000
SQUARE = 380


def similarity_mapper(low: float) -> LinearColorMapper:
    """Viridis from ``low`` to 1; anything below the bound is grey."""
    return LinearColorMapper(palette=Viridis256, low=low, high=1.0, low_color="#d9d9d9")


def matrix_heatmap(matrix: np.ndarray, labels: list[str], low: float, title: str, name: str):
    """A square similarity matrix as an image, row 0 at the top, labelled on both axes."""
    n = len(labels)
    fig = readable_figure(name=name, width=SQUARE + 80, height=SQUARE + 50, title=title,
                          x_range=(-0.5, n - 0.5), y_range=(n - 0.5, -0.5),
                          tooltips=[("row", "$y{0}"), ("column", "$x{0}"), ("cosine", "@image{0.000}")])
    mapper = similarity_mapper(low)
    fig.image(image=[matrix], x=-0.5, y=-0.5, dw=n, dh=n, color_mapper=mapper)
    overrides = dict(enumerate(labels))
    fig.xaxis.major_label_overrides = overrides
    fig.yaxis.major_label_overrides = overrides
    fig.xaxis.major_label_orientation = 0.9
    add_color_bar(fig, mapper, "cosine")
    return fig


def laminar_heatmap(run: Run, center: bool, skip_first: bool, low: float):
    """Every token pair (rows, thinned to at most MAX_PAIRS_DRAWN) against boundary, and the mean per boundary."""
    profile = laminar_profile(run, center=center, skip_first=skip_first)
    n_boundaries, n_pairs = profile.similarities.shape
    if n_pairs == 0:
        return pn.pane.Markdown("The laminar profile needs at least two tokens.")
    stride = max(1, n_pairs // MAX_PAIRS_DRAWN)
    shown = profile.similarities[:, ::stride].T  # [pair, boundary]
    mapper = similarity_mapper(low)
    thinned = f", every {stride}th of {n_pairs}" if stride > 1 else f", {n_pairs}"
    fig = readable_figure(name="laminar_profile", width=SQUARE + 90, height=SQUARE,
                          title=f"Laminar profile: token pairs{thinned} · {run.seq_len} tokens",
                          x_range=(-0.5, n_boundaries - 0.5), y_range=(0, shown.shape[0]),
                          tooltips=[("boundary", "$x{0}"), ("cosine", "@image{0.000}")])
    fig.image(image=[shown], x=-0.5, y=0, dw=n_boundaries, dh=shown.shape[0], color_mapper=mapper)
    fig.xaxis.major_label_overrides = dict(enumerate(profile.labels))
    fig.xaxis.major_label_orientation = 0.9
    fig.yaxis.axis_label = "token pair"
    add_color_bar(fig, mapper, "cosine")
    mean = readable_figure(name="laminar_mean", width=SQUARE, height=SQUARE, title="Mean over pairs per boundary",
                           x_range=fig.x_range, tooltips=[("boundary", "$x{0}"), ("mean cosine", "@y{0.000}")])
    mean.line(np.arange(n_boundaries), profile.mean, line_width=3)
    mean.scatter(np.arange(n_boundaries), profile.mean, size=8)
    mean.xaxis.major_label_overrides = dict(enumerate(profile.labels))
    mean.xaxis.major_label_orientation = 0.9
    mean.yaxis.axis_label = "mean cosine"
    return pn.Row(pn.pane.Bokeh(fig), pn.pane.Bokeh(mean))


def position_labels(run: Run, positions) -> list[str]:
    """``position:token`` for each position, whitespace made visible (canvas text: no HTML involved)."""
    return [f"{p}:{visible_token(run.tokens[p])}" for p in positions]


class SimilarityView(TabView):
    """The three cosine-similarity views of the state's run, with their pickers and switches."""

    skip_first = param.Boolean(default=False, label="leave out the first token")
    center = param.Boolean(default=False, label="mean-center the vectors")
    across_low = param.Number(default=0.0, bounds=(-1.0, 0.95), step=0.05, label="colour scale lower bound")
    within_low = param.Number(default=0.0, bounds=(-1.0, 0.95), step=0.05, label="colour scale lower bound")
    laminar_low = param.Number(default=0.0, bounds=(-1.0, 0.95), step=0.05, label="colour scale lower bound")

    @param.depends("state.run", "state.token", "center", "across_low", "state.shown_tab")
    def _across(self):
        self.skip_while_hidden()
        run = self.state.run
        if run is None:
            return pn.pane.Markdown("Run a prompt to compare vectors.")
        position = min(self.state.token, run.seq_len - 1)
        labels, matrix = token_across_layers(run, position, center=self.center)
        return pn.pane.Bokeh(matrix_heatmap(matrix, labels, self.across_low,
                                            f"Token {position} across boundaries · {run.seq_len} tokens",
                                            "similarity_across_layers"))

    @param.depends("state.run", "state.layer", "center", "skip_first", "within_low", "state.shown_tab")
    def _within(self):
        self.skip_while_hidden()
        run = self.state.run
        if run is None:
            return pn.pane.Markdown("")
        layer = min(self.state.layer, run.n_layers - 1)
        positions, matrix = tokens_within_layer(run, f"layers.{layer}.layer_output", center=self.center,
                                                skip_first=self.skip_first)
        return pn.pane.Bokeh(matrix_heatmap(matrix, position_labels(run, positions), self.within_low,
                                            f"Tokens at block {layer}'s output · {run.seq_len} tokens",
                                            "similarity_within_layer"))

    @param.depends("state.run", "center", "skip_first", "laminar_low", "state.shown_tab")
    def _laminar(self):
        self.skip_while_hidden()
        run = self.state.run
        if run is None:
            return pn.pane.Markdown("")
        return laminar_heatmap(run, self.center, self.skip_first, self.laminar_low)

    @param.depends("state.run", "state.shown_tab")
    def _token_picker(self):
        self.skip_while_hidden()
        run = self.state.run
        if run is None:
            return pn.Spacer()
        options = dict(zip(position_labels(run, range(run.seq_len)), range(run.seq_len)))
        picker = pn.widgets.Select(label="token", options=options, value=min(self.state.token, run.seq_len - 1),
                                   width=220)
        picker.param.watch(lambda event: setattr(self.state, "token", event.new), "value")
        return picker

    def __panel__(self):
        layer_picker = pn.widgets.IntInput.from_param(self.state.param.layer, width=100)
        across_low, within_low, laminar_low = (pn.widgets.FloatSlider.from_param(self.param[name], width=220)
                                               for name in ("across_low", "within_low", "laminar_low"))
        return pn.Column(
            pn.Row(pn.widgets.Checkbox.from_param(self.param.skip_first),
                   pn.widgets.Checkbox.from_param(self.param.center)),
            pn.Row(pn.Column(pn.Row(self._token_picker, across_low), self._across),
                   pn.Column(pn.Row(layer_picker, within_low), self._within)),
            pn.Column(laminar_low, self._laminar))
