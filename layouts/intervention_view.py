"""The scaling intervention: the target's log-probability at the last position when each block's output is
scaled by α, against the clean run; points appear as each block's pass finishes."""

from __future__ import annotations

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, Span, Title

from model_backend.tokens import visible_token

from .highlight import marks_for, point_boxes, show_highlight
from .style import readable_figure, show_ticks
from .target_box import target_box
from .tab_view import TabView

MIN_SPAN = 1.0  # log-probability units the y axis always shows
LAST_BLOCK_NOTE = ("The last block's point sits on the clean line: the final norm divides the residual\n"
                   "by its own size, so scaling the whole last output changes nothing.")  # two lines: fits at 1024


def sweep_plot() -> tuple:
    """An empty log-probability-per-scaled-block figure (``intervention``), its points, the clean run's line, and the
    uniform output's line and note that α = 0 shows."""
    fig = readable_figure(name="intervention", height=420, x_range=(-0.5, 0.5), y_range=(-1, 0),
                          tooltips=[("block", "@x"), ("log p", "@y{0.000}")])
    points = ColumnDataSource({"x": [], "y": []}, name="intervention_points")
    fig.line("x", "y", source=points, line_width=3, legend_label="that block's output scaled")
    fig.scatter("x", "y", source=points, size=10, legend_label="that block's output scaled")
    clean = ColumnDataSource({"x": [], "y": []}, name="intervention_clean")
    fig.line("x", "y", source=clean, line_dash="dashed", line_color="#d62728", line_width=2,
             legend_label="clean run, nothing scaled")
    fig.xaxis.axis_label = "scaled block"
    fig.yaxis.axis_label = "log-probability"
    fig.legend.label_text_font_size = "15px"
    fig.legend.orientation = "horizontal"
    fig.add_layout(fig.legend[0], "above")  # above the plot, never over a point
    fig.add_layout(Title(text=LAST_BLOCK_NOTE, text_font_size="14px", text_font_style="italic"), "below")
    uniform = Span(dimension="width", location=0, line_dash="dotted", line_color="#555555", line_width=2,
                   visible=False, name="intervention_uniform")
    fig.add_layout(uniform)
    zero_note = Title(text="", text_font_size="14px", text_font_style="italic", visible=False,
                      name="intervention_zero_note")
    fig.add_layout(zero_note, "below")
    return fig, points, clean, uniform, zero_note


def zero_alpha_note(sweep) -> str:
    """Why α = 0 can put every point at one value: the stream after the scaled block is zero, and a model with no
    bias to write into it then outputs the uniform distribution, whose log p is computed from its vocabulary."""
    return (f"α = 0 zeroes the stream after the scaled block. Where no bias writes into it again, the output is\n"
            f"uniform over the {sweep.vocabulary_size:,} tokens: log p = −ln {sweep.vocabulary_size:,} = "
            f"{sweep.uniform_logprob:.2f} (dotted line).".replace("-", "−"))


def log_prob_range(points: np.ndarray, clean: float) -> tuple[float, float]:
    """A y range around the points and the clean line, at least ``MIN_SPAN`` tall, so a flat sweep is not drawn as
    noise magnified to fill the plot."""
    low, high = float(np.min(points, initial=clean)), float(np.max(points, initial=clean))
    middle, half = (low + high) / 2, max((high - low) * 0.6, MIN_SPAN / 2)
    return middle - half, middle + half


class InterventionView(TabView):
    """Target and α inputs, a button that asks for the sweep, its progress, and the plot filling in."""

    watches = ("run", "sweep", "highlight")

    def build(self) -> None:
        self.fig, self.points, self.clean, self.uniform, self.zero_note = sweep_plot()
        self.note = pn.pane.HTML("Run a prompt, then scale each block.")

    def refresh(self) -> None:
        run, sweep = self.state.run, self.state.sweep
        if run is None:
            return
        if sweep is None:
            self.note.object = "<p>Scaling each block in turn…</p>"
            self.points.data = {"x": [], "y": []}
            self.clean.data = {"x": [], "y": []}
            self.state.param.trigger("sweep_requested")
            return
        done = len(sweep.scaled_logprobs)
        self.points.data = {"x": np.arange(done), "y": sweep.scaled_logprobs}
        self.clean.data = {"x": [-0.5, run.n_layers - 0.5], "y": [sweep.clean_logprob] * 2}
        zeroed = sweep.alpha == 0
        # Kept from build: a figure's select walks all its models, most of a refresh's time.
        self.uniform.update(location=sweep.uniform_logprob, visible=zeroed)
        self.zero_note.update(text=zero_alpha_note(sweep) if zeroed else "", visible=zeroed)
        shown = np.append(sweep.scaled_logprobs, sweep.uniform_logprob) if zeroed else sweep.scaled_logprobs
        low, high = log_prob_range(shown, sweep.clean_logprob)
        self.fig.y_range.update(start=low, end=high)
        show_highlight(self.fig, point_boxes(marks_for(self.state, "intervention"), sweep.scaled_logprobs,
                                             (high - low) / 8), middle=(run.n_layers - 1) / 2)
        show_ticks(self.fig.xaxis, range(run.n_layers))
        self.fig.x_range.update(start=-0.5, end=run.n_layers - 0.5)
        progress = "" if done == run.n_layers else f" · {done} of {run.n_layers} so far"
        match = self.state.target_match
        token = match.followed.labels[0] if match is not None and match.token_id == sweep.target_id else ""
        self.fig.title.text = (f"log p({visible_token(token) or sweep.target_id}) next, block {sweep.site} × "
                               f"{sweep.alpha:g} · {run.seq_len} tokens{progress}")
        self.note.object = f"<p>Clean run: log p = {sweep.clean_logprob:.3f}.</p>"

    def layout(self):
        box, note = target_box(self.state)
        return pn.Column(
            pn.FlexBox(box,
                   pn.widgets.FloatSlider.from_param(self.state.param.alpha, width=300),
                   # no tooltip: at the row's right end it ran past the screen's edge, and the label says it all
                   pn.widgets.Button.from_param(self.state.param.sweep_requested, color="primary", width=200,
                                                description=None)),
            note, self.note, pn.pane.Bokeh(self.fig))
