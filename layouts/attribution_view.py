"""Direct logit attribution as bars: each writer's (or each head's) term in one token's logit at one position, the
visible check that the bars sum to the model's logit, and a click on a bar pins the card of the value it reads."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING
from functools import partial

import pandas as pd
import panel as pn
import param
from bokeh.models import ColumnDataSource, HoverTool, Legend, LegendItem, Range1d, TapTool

from model_backend.names import FINAL_NORM_BIAS, full_name, parse_full_name
from model_backend.run import Run
from model_backend.tokens import visible_token

from .attribution_axis import EMB_X, bar_places, block_ticker
from .downloads import csv_download
from .highlight import bar_boxes, marks_for, show_highlight
from .style import readable_figure
from .target_box import target_box
from .tab_view import TabView

if TYPE_CHECKING:  # the attribution module imports torch; the view only reads its arrays
    from model_backend.attribution import LogitAttribution

PLOT_PIXELS = 540  # the plot's width beside the sidebar at 1024x768, the narrowest it is drawn
KIND_COLORS = {"embeddings": "#7f7f7f", "attention": "#ff7f0e", "MLP": "#2ca02c", "bias": "#bcbd22",
               "bfloat16 rounding": "#9467bd"}
# The bars outside the blocks, and the diagram part whose card explains each. Without position embeddings, block 0's
# layer_input is the token embeddings.
OUTSIDE_BLOCKS = {
    "token_embeddings": "token_embeddings",
    "position_embeddings": "position_embeddings",
    full_name("layer_input", 0): "token_embeddings",
    FINAL_NORM_BIAS: "final_norm",
}


def kind_of(label: str) -> str:
    """What a bar is, for its colour: embeddings, attention (a block's or a head's), MLP, a bias, or the rounding of
    an output projection multiplied in bfloat16."""
    if label == FINAL_NORM_BIAS:
        return "bias"
    value, _, part = parse_full_name(label)
    if part == "bias":
        return "bias"
    if part == "rounding":
        return "bfloat16 rounding"
    if value.name == "attention_output":
        return "attention"
    return "MLP" if value.name == "mlp_output" else "embeddings"


def part_of(label: str) -> str:
    """The diagram part whose card explains a bar's value: ``layers.3.attention_output.head_5`` -> ``attention.3``."""
    if label in OUTSIDE_BLOCKS:
        return OUTSIDE_BLOCKS[label]
    value, layer, _ = parse_full_name(label)
    return f"{'attention' if value.name == 'attention_output' else 'mlp'}.{layer}"


def name_bars_on_axis(fig, per_head: bool) -> None:
    """Say on the axis what the bars of a block are: its heads (and bias) then its MLP, or its attention then MLP."""
    fig.xaxis.axis_label = ("block: its heads in order, then its MLP" if per_head else
                            "block: attention, then MLP (colours in the legend)")


def attribution_figure() -> tuple:
    """An empty bar chart (figure ``logit_attribution``) and its source (``attribution_bars``), one bar per term."""
    source = ColumnDataSource({"x": [], "width": [], "label": [], "term": [], "kind": [], "color": []},
                              name="attribution_bars")
    fig = readable_figure(name="logit_attribution", x_range=Range1d(-2, 1), tools="xpan,xwheel_zoom,reset,save",
                          title="Direct logit attribution")
    bars = fig.vbar(x="x", top="term", width="width", source=source, color="color", line_color=None,
                    selection_line_color="black", selection_line_width=3, nonselection_fill_alpha=1.0)
    fig.add_tools(TapTool(renderers=[bars]),
                  HoverTool(renderers=[bars], tooltips=[("value", "@label"), ("term", "@term{0.0000}")]))
    fig.add_layout(Legend(items=[LegendItem(label={"field": "kind"}, renderers=[bars])], label_text_font_size="15px",
                          orientation="horizontal", name="attribution_legend"), "above")
    fig.yaxis.axis_label = "term in the logit"
    fig.xgrid.visible = False
    return fig, source


def sum_check(attribution: LogitAttribution, bars_sum: float) -> str:
    """The bars' sum beside the model's own logit and their difference: the proof that the split is exact."""
    difference = bars_sum - attribution.logit
    relative = abs(difference) / max(abs(attribution.logit), 1e-12)
    return (f"<p class='attribution-check'>Sum of the bars: <b>{bars_sum:.6f}</b> · the model's logit: "
            f"<b>{attribution.logit:.6f}</b> · difference {difference:.1e} (relative {relative:.1e})</p>")


def what_is_attributed(attribution: LogitAttribution, run: Run) -> str:
    """Which logit the bars split: the position and its token, and the target the tabs share (all escaped)."""
    target = html.escape(visible_token(attribution.target_token))
    return (f"<p class='attribution-about'>Logit of <code>{target}</code> (token {attribution.target_id}) at "
            f"position {attribution.position} <code>{html.escape(visible_token(run.tokens[attribution.position]))}"
            f"</code>, through the final norm with its scale frozen there. Click a bar to pin its value's card.</p>")


def position_options(run: Run) -> dict[str, int]:
    """``position:token`` for every position; the last is offered as -1, so it stays the last for a new prompt."""
    labels = [f"{p}:{visible_token(token)}" for p, token in enumerate(run.tokens)]
    return {**{label: p for p, label in enumerate(labels[:-1])}, f"{labels[-1]} (last)": -1}


class AttributionView(TabView):
    """The state's attribution as bars, with a per-head switch, a position picker, a target box and a CSV."""

    per_head = param.Boolean(default=False, label="one bar per attention head")

    watches = ("run", "attribution", "attribution_position", "highlight")
    own_watches = ("per_head",)

    def build(self) -> None:
        self.figure, self.bars = attribution_figure()
        self.bars.selected.on_change("indices", self._on_tap)
        self.about = pn.pane.HTML("Run a prompt to attribute its logits.")
        self.check = pn.pane.HTML("")
        self.pinned_note = pn.pane.HTML("")
        self.position_picker = pn.widgets.Select(label="position", options={}, width=240)
        self.position_picker.param.watch(lambda event: setattr(self.state, "attribution_position", event.new),
                                         "value")
        self.download = csv_download(self.table, "logit_attribution.csv", "Download the bars as CSV")

    def refresh(self) -> None:
        run, attribution = self.state.run, self.state.attribution
        if run is None:
            return
        options = position_options(run)
        chosen = self.state.attribution_position if self.state.attribution_position in options.values() else -1
        self.position_picker.param.update(options=options, value=chosen)
        if attribution is None:
            self.state.param.trigger("attribution_requested")
            return
        labels, terms = attribution.bars(self.per_head)
        kinds = [kind_of(label) for label in labels]
        xs, widths = bar_places(labels, run.n_layers)
        if list(self.bars.data["label"]) != labels:
            self.bars.selected.indices = []
        self.bars.data = {"x": xs, "width": widths, "label": labels, "term": terms, "kind": kinds,
                          "color": [KIND_COLORS[k] for k in kinds]}
        start, end = EMB_X - 0.7, max(xs) + 0.7
        self.figure.x_range.update(start=start, end=end, reset_start=start, reset_end=end)
        self.figure.xaxis.ticker = block_ticker(run.n_layers, PLOT_PIXELS, FINAL_NORM_BIAS in labels)
        self.figure.xaxis.major_label_overrides = {EMB_X: "emb", run.n_layers: "norm"}
        name_bars_on_axis(self.figure, self.per_head)
        show_highlight(self.figure, bar_boxes(marks_for(self.state, "logit_attribution"), xs, widths, labels, terms))
        self.figure.title.text = (f"Direct logit attribution of {visible_token(attribution.target_token)} at position "
                                  f"{attribution.position} · {run.seq_len} tokens")
        self.check.object = sum_check(attribution, float(terms.sum()))
        self.about.object = what_is_attributed(attribution, run)

    def _on_tap(self, _attr, _old, indices) -> None:
        if indices:
            # Changing Panel and Bokeh models from inside a Bokeh callback: leave it to the next tick.
            pn.state.execute(partial(self.pin, self.bars.data["label"][indices[0]]), schedule=True)

    def pin(self, label: str) -> None:
        """Pin the card of the value a bar reads (once) and say where it is shown; the bar stays outlined."""
        part = part_of(label)
        if part not in self.state.pinned:
            self.state.pinned = [*self.state.pinned, part]
        self.pinned_note.object = (f"<p class='attribution-pinned'>Pinned the card of "
                                   f"<code>{html.escape(label)}</code> "
                                   f"(<code>{html.escape(part)}</code>): it is shown in the <b>Block diagram</b> "
                                   f"tab.</p>")

    def table(self) -> pd.DataFrame:
        """The bars shown, for the CSV download: value name, term, and which logit they split."""
        attribution = self.state.attribution
        if attribution is None:
            return pd.DataFrame(columns=["term"])
        labels, terms = attribution.bars(self.per_head)
        return pd.DataFrame({"term": terms, "position": attribution.position, "target_id": attribution.target_id,
                             "target": attribution.target_token, "logit": attribution.logit},
                            index=pd.Index(labels, name="value"))

    def layout(self):
        box, note = target_box(self.state)
        return pn.Column(
            pn.FlexBox(self.position_picker, box, pn.widgets.Checkbox.from_param(self.param.per_head, align="end")),
            note, self.about, self.check,
            pn.pane.Bokeh(self.figure, sizing_mode="stretch_width"), self.pinned_note, self.download)
