"""Two models' residual norms for one prompt, one heatmap under the other on one colour scale, each titled with its
model and with its sinks marked: two training checkpoints side by side show the sink forming."""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, LinearColorMapper
from bokeh.palettes import Viridis256

from model_backend.boundaries import residual_boundaries
from model_backend.norms import SinkReport
from model_backend.run import Run

from .heatmap import heatmap, show_cells
from .style import show_ticks, spaced_ticks
from .tab_view import TabView

NOTHING = "nothing"
SELECTOR_WIDTH = {False: 480, True: 400}  # label and box together, in pixels
INLINE_LABEL = ":host .bk-input-group {flex-direction: row; align-items: center; gap: 0.5em}"


@dataclass(frozen=True)
class ComparedRun:
    """The compared model's run of the prompt and the sinks found in it."""

    run: Run
    sinks: SinkReport


def compared_heatmap(name: str, mapper) -> tuple:
    """An empty heatmap (figure ``name``) on the shared ``mapper``, its image source and its sink marks."""
    fig, image = heatmap(name, mapper, "norm", tooltips=[("position", "$x{0}"), ("norm", "@image{0.0}")],
                         x_label="position", height=260)
    sinks = ColumnDataSource({"position": []})
    fig.vspan(x="position", source=sinks, line_color="#d62728", line_width=3)
    return fig, image, sinks


def heatmap_title(run: Run, sinks: SinkReport) -> str:
    """The model's display name, then where its sinks are (red lines), or that it has none."""
    found = ", ".join(str(s.position) for s in sinks.sinks)
    return f"{run.model_name} · {f'sink at position {found} (red)' if found else 'no sink detected'}"


def shared_color_range(matrices: list[np.ndarray], skip_first: bool = True) -> tuple[float, float]:
    """One colour range for every matrix, leaving position 0 out (``skip_first``) where there are others (a sink's
    norm would flatten the rest; cells above the range are magenta)."""
    scaled = [m[:, 1:] if skip_first and m.shape[1] > 1 else m for m in matrices]
    return max(min(float(m.min()) for m in scaled), 1e-6), max(float(m.max()) for m in scaled)


def show_norms(fig, image, marks, run: Run, sinks: SinkReport, norms: np.ndarray) -> None:
    """Draw one run's norms, boundary labels, sink marks and title into one of the heatmaps."""
    labels = [label for label, _ in residual_boundaries(run)]
    show_cells(fig, image, norms)
    show_ticks(fig.yaxis, spaced_ticks(len(labels)))
    fig.yaxis.major_label_overrides = dict(enumerate(labels))
    marks.data = {"position": [s.position for s in sinks.sinks]}
    fig.title.text = heatmap_title(run, sinks)


def comparison_selector(presenter: bool) -> pn.widgets.Select:
    """The "compare with" selector, its label beside the box instead of above it, as wide as fits beside the tab's
    other choices at 1024 pixels in presenter mode and at 1366 otherwise: it then takes no line of its own above the
    heatmap (on a projector's first screen, a heatmap's rows). The list it opens shows each name whole."""
    return pn.widgets.Select(label="compare with", options=[NOTHING], value=NOTHING,
                             width=SELECTOR_WIDTH[presenter], stylesheets=[INLINE_LABEL])


class NormsComparisonView(TabView):
    """A "compare with" selector; once a model is chosen and its run is in, both runs' norm heatmaps."""

    watches = ("run", "sinks", "comparison", "comparison_note", "compare", "compare_offered")

    def __init__(self, state, **params):
        self.selector = comparison_selector(state.presenter)  # made at once: it sits in the Norms tab's own row
        super().__init__(state, **params)
        self.selector.param.watch(lambda event: setattr(self.state, "compare", self.selector_choice(event.new)),
                                  "value")

    def build(self) -> None:
        self.mapper = LinearColorMapper(palette=Viridis256, high_color="#ff00ff")
        self.figures = [compared_heatmap(f"comparison_heatmap_{i}", self.mapper) for i in range(2)]
        self.note = pn.pane.HTML("", css_classes=["comparison-note"])
        self.heatmaps = pn.Column(*[pn.pane.Bokeh(fig) for fig, _, _ in self.figures], visible=False,
                                  sizing_mode="stretch_width")

    def selector_choice(self, shown: str) -> str:
        """The state's ``compare`` for the selector's option: empty for "nothing"."""
        return "" if shown == NOTHING else shown

    def refresh(self) -> None:
        state = self.state
        chosen = state.compare or NOTHING
        self.selector.options = list(dict.fromkeys([NOTHING, *state.compare_offered, chosen]))
        self.selector.value = chosen
        self.note.object = f"<p>{html.escape(state.comparison_note)}</p>" if state.comparison_note else ""
        compared = state.comparison
        shown = compared is not None and state.run is not None and state.sinks is not None
        self.heatmaps.visible = shown
        if not shown:
            return
        runs = [(state.run, state.sinks), (compared.run, compared.sinks)]
        norms = [sinks.residual_norms for _, sinks in runs]
        low, high = shared_color_range(norms)
        self.mapper.update(low=low, high=high)
        for (fig, image, marks), (run, sinks), matrix in zip(self.figures, runs, norms):
            show_norms(fig, image, marks, run, sinks, matrix)

    def layout(self):
        """The note and the heatmaps; the selector is in the Norms tab's row of choices."""
        return pn.Column(self.note, self.heatmaps, sizing_mode="stretch_width")
