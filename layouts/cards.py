"""A pinned card: what a diagram part reads, where, under which names and hooks, with live figures for the run."""

from __future__ import annotations

import html
from collections.abc import Callable

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource

from model_backend.families import Family
from model_backend.names import full_name, parse_full_name
from model_backend.norms import SinkReport
from model_backend.part_descriptions import PartDescription
from model_backend.run import Run
from model_backend.steering_size import steering_report
from model_backend.tokens import visible_token

from .diagram_parts import parse_part_id
from .style import readable_figure

CARD_WIDTH = 430


def block_identity_error(run: Run, layer: int) -> float:
    """Max |layer_input + attention_output + mlp_output - layer_output| over the block: the residual identity."""
    total = sum(run[full_name(name, layer)] for name in ("layer_input", "attention_output", "mlp_output"))
    return float(np.abs(total - run[full_name("layer_output", layer)]).max())


def value_rows(full_names: list[str], family: Family, run: Run | None) -> str:
    """An HTML list of each value read at the part: name, shape, meaning, module and side, TransformerLens hook."""
    items = []
    reads = family.value_reads()
    for key in full_names:
        value, layer, _ = parse_full_name(key)
        role, side = reads[value.name]
        module = family.module_path(role, layer) or "(none in this family)"
        shape = str(tuple(run.shape_of(key))) if run is not None and _has_value(run, key) else value.layout
        hook = value.hook_name(layer) or "(no hook)"
        items.append(
            f"<li><code>{html.escape(key)}</code> {html.escape(shape)}<br>{html.escape(value.meaning)}<br>"
            f"read at the <b>{html.escape(side)}</b> of <code>{html.escape(module)}</code><br>"
            f"TransformerLens: <code>{html.escape(hook)}</code></li>")
    return "<ul class='card-values'>" + "".join(items) + "</ul>"


def _has_value(run: Run, key: str) -> bool:
    return key in run or parse_full_name(key)[0].name == "attention_probabilities"


def sink_lines(key: str, run: Run, sinks: SinkReport | None) -> str:
    """The value's norm at each detected sink next to the median of the other positions, or a plain 'no sink'."""
    if sinks is None or not sinks.sinks:
        return "<p>No sink detected in this run.</p>"
    norms = np.linalg.norm(run[key], axis=-1)
    lines = []
    for sink in sinks.sinks:
        others = np.delete(norms, sink.position)
        ratio = norms[sink.position] / np.median(others) if others.size else float("nan")
        lines.append(f"<p>Sink at position {sink.position} <code>{html.escape(visible_token(sink.token))}</code>: "
                     f"norm {norms[sink.position]:.1f} ({ratio:.1f}× the median of the others)</p>")
    return "".join(lines)


def norm_plot() -> tuple:
    """An empty bar plot of one value's norm per position, sinks in red, and its source."""
    fig = readable_figure(width=CARD_WIDTH - 20, height=190, tools="hover,save",
                          tooltips=[("position", "@x"), ("norm", "@top{0.0}")])
    bars = ColumnDataSource({"x": [], "top": [], "color": []})
    fig.vbar(x="x", top="top", width=0.8, color="color", source=bars)
    fig.xaxis.axis_label = "position"
    fig.title.text_font_size = "14px"
    return fig, bars


def next_token_lines(run: Run) -> str:
    """What the last position's logits say: the top token's id, logit and softmax probability, and the spread."""
    logits = run.logits_at([-1])[0].astype(np.float64)
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    top = int(logits.argmax())
    return (f"<p><b>Next token</b> (last position): id {top}, logit {logits[top]:.2f}, probability "
            f"{probabilities[top]:.1%}; logits span {logits.min():.1f} to {logits.max():.1f} over "
            f"{logits.size:,} tokens</p>")


def steering_lines(run: Run, layer: int) -> str:
    """On the steered block's card: what was added to its input, and how large beside the stream there."""
    if run.steering is None or run.steering.block != layer:
        return ""
    report = steering_report(run, run.steering)
    return (f"<p class='card-steered'><b>Steered</b>: +{run.steering.alpha:g}·v added to "
            f"<code>{html.escape(full_name('layer_input', layer))}</code> at every position, v = toward "
            f"{html.escape(visible_token(run.steering.toward))} − away from "
            f"{html.escape(visible_token(run.steering.away))}; |α·v| = {report.vector_norm:.1f}, "
            f"{report.ratio:.2f}× the median norm of the stream there.</p>")


def card_class(part_id: str) -> str:
    """The CSS class that names a part's card on the page (the diagram scrolls a newly pinned card into view)."""
    return "card-" + part_id.replace(".", "-")


class PartCard:
    """The card of one pinned part: what it reads, where, under which names and hooks, with live figures that a new
    run updates in place."""

    def __init__(self, part_id: str, family: Family, n_layers: int, on_close: Callable[[str], None],
                 descriptions: dict[str, PartDescription] | None = None):
        kind, layer = parse_part_id(part_id, family, n_layers)
        described = (descriptions or {}).get(kind.key)
        self.what = f"<p class='card-what'>{html.escape(described.what)}</p>" if described is not None else ""
        self.part_id, self.family, self.kind, self.layer = part_id, family, kind, layer
        self.full_names = [full_name(name, layer) for name in kind.value_names]
        module = family.module_path(kind.role, layer) or "(none in this family)"
        title = kind.label.format(i=layer) + (f" · block {layer}" if kind.per_layer and kind.key != "block" else "")
        close = pn.widgets.Button(label="✕ unpin", color="light", width=90, height=38)
        close.on_click(lambda _event: on_close(part_id))
        self.values = pn.pane.HTML(self.header(title, module, None), width=CARD_WIDTH - 20)
        self.plot, self.bars = norm_plot()
        self.plot_pane = pn.pane.Bokeh(self.plot, visible=False)
        self.live = pn.pane.HTML("", width=CARD_WIDTH - 20)
        self.title, self.module = title, module
        self.shown_for: tuple = (None, None)
        self.layout = pn.Column(pn.Row(pn.Spacer(), close), self.values, self.plot_pane, self.live, width=CARD_WIDTH,
                                css_classes=["part-card", card_class(part_id)], name=f"card {part_id}",
                                styles={"border": "2px solid #888", "border-radius": "6px", "padding": "4px",
                                        "background": "white"})

    def header(self, title: str, module: str, run: Run | None) -> str:
        return (f"<h3>{html.escape(title)}</h3>{self.what}<p>module <code>{html.escape(module)}</code></p>"
                + value_rows(self.full_names, self.family, run))

    def shows(self, run: Run, sinks: SinkReport | None) -> bool:
        """Whether the card already shows this run and sink report."""
        return self.shown_for[0] is run and self.shown_for[1] is sinks

    def show(self, run: Run, sinks: SinkReport | None) -> None:
        """Fill the card with this run's shapes, the norm per position and the sink and identity figures."""
        self.shown_for = (run, sinks)
        self.values.object = self.header(self.title, self.module, run)
        live = [name for name in self.full_names if name in run]
        extra = ""
        if live:
            norms = np.linalg.norm(run[live[-1]], axis=-1)
            sink_positions = set(sinks.sink_positions) if sinks is not None else set()
            self.bars.data = {"x": np.arange(len(norms)), "top": norms,
                              "color": ["#d62728" if p in sink_positions else "#1f77b4" for p in range(len(norms))]}
            self.plot.title.text = f"‖{live[-1]}‖ per position · {run.seq_len} tokens"
            extra = sink_lines(live[-1], run, sinks)
        self.plot_pane.visible = bool(live)
        if self.kind.key == "block":
            extra += (f"<p><b>Identity check</b>: layer_input + attention_output + mlp_output vs layer_output, "
                      f"max error {block_identity_error(run, self.layer):.2e}</p>") + steering_lines(run, self.layer)
        if self.kind.key == "logits":
            extra += next_token_lines(run)
        self.live.object = extra

