"""Cosine similarity three ways: one token across boundaries, all tokens within a boundary, and every token pair at
every boundary (the laminar profile). Each heatmap has a colour bar and a slider for its lower bound."""

from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, LinearColorMapper
from bokeh.palettes import Viridis256

from model_backend.names import full_name
from model_backend.run import Run
from model_backend.similarity import laminar_profile, token_across_layers, tokens_within_layer
from model_backend.tokens import visible_token

from .heatmap import heatmap, show_cells
from .highlight import first_row_boxes, marks_for, row_and_column_boxes, show_highlight
from .style import cells_range, readable_figure, show_matrix
from .tab_view import TabView

MAX_PAIRS_DRAWN = 3000
PAIRS_EXPLAINED = ("<p class='pairs-explained'>Below: each row is one pair of tokens, each column a boundary, the "
                   "colour their cosine there (some call this the laminar profile). Rows turning yellow to the right "
                   "mean the tokens' residuals grow alike deeper in the model; the right-hand plot is the mean over "
                   "pairs.</p>")
SQUARE = 380


def similarity_mapper() -> LinearColorMapper:
    """Viridis up to 1; anything below the slider's lower bound is grey."""
    return LinearColorMapper(palette=Viridis256, low=0.0, high=1.0, low_color="#d9d9d9")


def matrix_heatmap(name: str) -> tuple:
    """An empty square similarity heatmap, row 0 at the top, with its source and colour mapper."""
    mapper = similarity_mapper()
    fig, source = heatmap(name, mapper, "cosine", rows_down=True, slanted_x=True, width=SQUARE + 80, height=SQUARE + 50,
                          tooltips=[("row", "$y{0}"), ("column", "$x{0}"), ("cosine", "@image{0.000}")])
    return fig, source, mapper


def show_square(fig, source, matrix: np.ndarray, labels: list[str], title: str) -> None:
    """Put a square matrix and its row/column labels into a ``matrix_heatmap``."""
    show_cells(fig, source, matrix, rows_down=True)
    overrides = dict(enumerate(labels))
    fig.xaxis.major_label_overrides = overrides
    fig.yaxis.major_label_overrides = overrides
    fig.title.text = title


def laminar_figures() -> tuple:
    """Empty figures for every token pair against boundary (``laminar_profile``) and the mean per boundary
    (``laminar_mean``), with their sources and the pairs' colour mapper."""
    mapper = similarity_mapper()
    fig, pairs = heatmap("laminar_profile", mapper, "cosine", y_range=(0, 1), image_y=0, slanted_x=True,
                         y_label="token pair", width=SQUARE + 90, height=SQUARE,
                         tooltips=[("boundary", "$x{0}"), ("cosine", "@image{0.000}")])
    mean = readable_figure(name="laminar_mean", width=SQUARE, height=SQUARE, x_range=fig.x_range,
                           title="Mean over pairs per boundary",
                           tooltips=[("boundary", "$x{0}"), ("mean cosine", "@y{0.000}")])
    mean_source = ColumnDataSource({"x": [], "y": []}, name="laminar_mean_data")
    mean.line("x", "y", source=mean_source, line_width=3)
    mean.scatter("x", "y", source=mean_source, size=8)
    mean.xaxis.major_label_orientation = 0.9
    mean.yaxis.axis_label = "mean cosine"
    return fig, pairs, mapper, mean, mean_source


def position_labels(run: Run, positions) -> list[str]:
    """``position:token`` for each position, whitespace made visible (canvas text: no HTML involved)."""
    return [f"{p}:{visible_token(run.tokens[p])}" for p in positions]


class SimilarityView(TabView):
    """The three cosine-similarity views of the state's run, with their pickers and switches."""

    skip_first = param.Boolean(default=False, label="leave out the first token")
    center = param.Boolean(default=False, label="mean-center the vectors")
    across_low = param.Number(default=0.0, bounds=(-1.0, 0.95), step=0.05,
                              label="grey below (token across boundaries)")
    within_low = param.Number(default=0.0, bounds=(-1.0, 0.95), step=0.05, label="grey below (tokens in a block)")
    laminar_low = param.Number(default=0.0, bounds=(-1.0, 0.95), step=0.05, label="grey below (every token pair)")

    watches = ("run", "token", "layer", "highlight")
    own_watches = ("skip_first", "center")

    def build(self) -> None:
        self.across, self.across_image, across_mapper = matrix_heatmap("similarity_across_layers")
        self.within, self.within_image, within_mapper = matrix_heatmap("similarity_within_layer")
        self.laminar, self.laminar_image, laminar_mapper, self.mean, self.mean_data = laminar_figures()
        for mapper, bound in ((across_mapper, "across_low"), (within_mapper, "within_low"),
                              (laminar_mapper, "laminar_low")):
            mapper.low = self.param[bound].default
            self.param.watch(lambda event, mapper=mapper: setattr(mapper, "low", event.new), bound)
        self.token_picker = pn.widgets.Select(label="token", options={}, width=220)
        self.token_picker.param.watch(lambda event: setattr(self.state, "token", event.new), "value")

    def refresh(self) -> None:
        run = self.state.run
        if run is None:
            return
        position = min(self.state.token, run.seq_len - 1)
        self.token_picker.param.update(options=dict(zip(position_labels(run, range(run.seq_len)),
                                                        range(run.seq_len))), value=position)
        labels, matrix = token_across_layers(run, position, center=self.center)
        show_square(self.across, self.across_image, matrix, labels,
                    f"Token {position} across boundaries · {run.seq_len} tokens")
        show_highlight(self.across, first_row_boxes(marks_for(self.state, "similarity_across_layers"), position,
                                                    len(labels)), scroll_to=False, middle=(len(labels) - 1) / 2)
        layer = min(self.state.layer, run.n_layers - 1)
        positions, matrix = tokens_within_layer(run, full_name("layer_output", layer), center=self.center,
                                                skip_first=self.skip_first)
        show_square(self.within, self.within_image, matrix, position_labels(run, positions),
                    f"Tokens at block {layer}'s output · {run.seq_len} tokens")
        show_highlight(self.within, row_and_column_boxes(marks_for(self.state, "similarity_within_layer"),
                                                         list(positions)), middle=(len(positions) - 1) / 2)
        self.show_laminar(run)

    def show_laminar(self, run: Run) -> None:
        """Every token pair (rows, thinned to at most MAX_PAIRS_DRAWN) against boundary, and the mean."""
        profile = laminar_profile(run, center=self.center, skip_first=self.skip_first)
        n_boundaries, n_pairs = profile.similarities.shape
        stride = max(1, n_pairs // MAX_PAIRS_DRAWN)
        shown = profile.similarities[:, ::stride].T  # [pair, boundary]
        show_matrix(self.laminar_image, shown if n_pairs else np.full((1, n_boundaries), np.nan))
        cells_range(self.laminar.x_range, n_boundaries)
        self.laminar.y_range.update(start=0, end=max(shown.shape[0], 1))
        overrides = dict(enumerate(profile.labels))
        self.laminar.xaxis.major_label_overrides = overrides
        self.mean.xaxis.major_label_overrides = overrides
        thinned = f", one in {stride} of {n_pairs}" if stride > 1 else f", {n_pairs}"
        self.laminar.title.text = f"Every token pair at every boundary{thinned} · {run.seq_len} tokens"
        mean = profile.mean if n_pairs else np.full(n_boundaries, np.nan)
        self.mean_data.data = {"x": np.arange(n_boundaries), "y": mean}

    def layout(self):
        layer_picker = pn.widgets.IntInput.from_param(self.state.param.layer, width=100)
        across_low, within_low, laminar_low = (pn.widgets.FloatSlider.from_param(self.param[name], width=220)
                                               for name in ("across_low", "within_low", "laminar_low"))
        return pn.Column(
            pn.FlexBox(pn.widgets.Checkbox.from_param(self.param.skip_first),
                       pn.widgets.Checkbox.from_param(self.param.center)),
            pn.FlexBox(pn.Column(pn.FlexBox(self.token_picker, across_low), pn.pane.Bokeh(self.across)),
                       pn.Column(pn.FlexBox(layer_picker, within_low), pn.pane.Bokeh(self.within))),
            pn.pane.HTML(PAIRS_EXPLAINED),
            pn.Column(laminar_low, pn.FlexBox(pn.pane.Bokeh(self.laminar), pn.pane.Bokeh(self.mean))))
