"""The scaling intervention: the target's log-probability at the last position when each block's output is
scaled by α, against the clean run."""

from __future__ import annotations

import numpy as np
import panel as pn
import param

from model_backend.interventions import ScalingSweep
from model_backend.tokens import visible_token

from .style import readable_figure
from .tab_view import TabView


def sweep_plot(sweep: ScalingSweep, target_token: str, seq_len: int):
    """Log-probability per scaled block, with the clean run as a dashed line (figure ``intervention``)."""
    layers = np.arange(len(sweep.scaled_logprobs))
    fig = readable_figure(name="intervention", height=420,
                          title=f"log p({visible_token(target_token)}) at the last position, each block's "
                                f"{sweep.site} × {sweep.alpha:g} · {seq_len} tokens",
                          tooltips=[("block", "@x"), ("log p", "@y{0.000}")])
    fig.line(layers, sweep.scaled_logprobs, line_width=3, legend_label="block scaled")
    fig.scatter(layers, sweep.scaled_logprobs, size=10)
    fig.line([layers[0], layers[-1]], [sweep.clean_logprob] * 2, line_dash="dashed", line_color="#d62728",
             line_width=2, legend_label=f"clean run: {sweep.clean_logprob:.3f}")
    fig.xaxis.ticker = list(layers)
    fig.xaxis.axis_label = "scaled block"
    fig.yaxis.axis_label = "log-probability"
    fig.legend.label_text_font_size = "15px"
    fig.legend.location = "bottom_right"
    return fig


class InterventionView(TabView):
    """Target and α inputs, a button that asks for the sweep, its progress, and the plot."""

    @param.depends("state.sweep", "state.shown_tab")
    def _plot(self):
        self.skip_while_hidden()
        run, sweep = self.state.run, self.state.sweep
        if run is None:
            return pn.pane.Markdown("Run a prompt, then scale each block.")
        if sweep is None:
            self.state.param.trigger("sweep_requested")
            return pn.pane.Markdown("Scaling each block in turn…")
        return pn.pane.Bokeh(sweep_plot(sweep, self.state.target, run.seq_len))

    def __panel__(self):
        return pn.Column(
            pn.Row(pn.widgets.TextInput.from_param(self.state.param.target, width=220),
                   pn.widgets.FloatSlider.from_param(self.state.param.alpha, width=300),
                   pn.widgets.Button.from_param(self.state.param.sweep_requested, color="primary",
                                                width=200)),
            pn.indicators.Progress(value=pn.bind(lambda share: int(share * 100), self.state.param.sweep_progress),
                                   max=100, width=500),
            self._plot)
