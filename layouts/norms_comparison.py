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


class NormsComparisonView(TabView):
    """A "compare with" selector; once a model is chosen and its run is in, both runs' norm heatmaps."""

    watches = ("run", "sinks", "comparison", "comparison_note", "compare", "compare_offered")

    def build(self) -> None:
        self.mapper = LinearColorMapper(palette=Viridis256, high_color="#ff00ff")
        self.figures = [compared_heatmap(f"comparison_heatmap_{i}", self.mapper) for i in range(2)]
        self.selector = pn.widgets.Select(label="compare with", width=320)
        self.selector.param.watch(lambda event: setattr(self.state, "compare", self.selector_choice(event.new)),
                                  "value")
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
        return pn.Column(self.selector, self.note, self.heatmaps, sizing_mode="stretch_width")
