"""Information-flow routes (Ferrando & Voita 2024) from plain arrays: tokens along x, blocks up y, a node per
position after each block's attention and after its MLP, an edge per route kept, its width its share, its heads'
shares on hover, the edges leaving a sink labelled; a threshold slider, a position picker and the exactness check."""

from __future__ import annotations

import html

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, HoverTool, Legend, LegendItem, TapTool

from model_backend.flow_graph import FlowGraph, InformationFlow, check_threshold, flow_graph
from model_backend.tokens import visible_token

from .style import enlarge_for_projector, readable_figure, show_ticks, spaced_ticks, token_axis_labels

EDGE_STYLES = {"attention": ("#1f77b4", "attention (a key's stream, through its heads)"),
               "sink": ("#d62728", "attention from a sink"), "residual": ("#7f7f7f", "residual"),
               "mlp": ("#2ca02c", "MLP's write")}
NODE_COLORS = {"embeddings": "#444444", "attention": "#1f77b4", "mlp": "#2ca02c"}
MLP_OFFSET = 0.22  # an MLP edge starts beside its residual edge's foot, so the two stay apart
MOST_WIDTH = 9.0
EMPTY_EDGES = {"x0": [], "y0": [], "x1": [], "y1": [], "width": [], "kind": [], "source": [], "target": [],
               "share": [], "heads": [], "layer": [], "head": []}
EMPTY_NODES = {"x": [], "y": [], "color": [], "label": [], "stage": []}


def stage_label(stage: int) -> str:
    """A node's stream in words: the embeddings, or a block's stream after its attention or its MLP."""
    if stage == 0:
        return "embeddings (block 0's input)"
    return f"block {(stage - 1) // 2} after its {'attention' if stage % 2 else 'MLP'}"


def heads_text(head_shares: tuple[float, ...]) -> str:
    """The heads that carry an edge, largest first: ``h3 0.41 · h0 0.07`` (those under 0.005 left out)."""
    order = np.argsort(head_shares)[::-1]
    shown = [f"h{h} {head_shares[h]:.2f}" for h in order if head_shares[h] >= 0.005]
    return " · ".join(shown) or "-"


def edge_columns(graph: FlowGraph, tokens: list[str]) -> dict[str, dict]:
    """The graph's edges as segment columns, one source per style (attention, sink, residual, MLP)."""
    columns = {kind: {key: [] for key in EMPTY_EDGES} for kind in EDGE_STYLES}
    for edge in graph.edges:
        kind = "sink" if edge.sink else edge.kind
        column = columns[kind]
        column["x0"].append(edge.source.position + (MLP_OFFSET if edge.kind == "mlp" else 0.0))
        column["y0"].append(edge.source.height)
        column["x1"].append(edge.target.position)
        column["y1"].append(edge.target.height)
        column["width"].append(1.0 + (MOST_WIDTH - 1.0) * edge.share)
        column["kind"].append(EDGE_STYLES[kind][1])
        column["source"].append(f"{edge.source.position}:{visible_token(tokens[edge.source.position])}, "
                                f"{stage_label(edge.source.stage)}")
        column["target"].append(f"{edge.target.position}:{visible_token(tokens[edge.target.position])}, "
                                f"{stage_label(edge.target.stage)}")
        column["share"].append(edge.share)
        column["heads"].append(heads_text(edge.head_shares) if edge.kind == "attention" else "-")
        column["layer"].append(edge.target.layer)
        column["head"].append(int(np.argmax(edge.head_shares)) if edge.kind == "attention" else -1)
    return columns


def node_columns(graph: FlowGraph, tokens: list[str]) -> dict:
    nodes = graph.nodes
    return {"x": [n.position for n in nodes], "y": [n.height for n in nodes],
            "color": [NODE_COLORS[n.site] for n in nodes], "stage": [stage_label(n.stage) for n in nodes],
            "label": [f"{n.position}:{visible_token(tokens[n.position])}" for n in nodes]}


def sink_labels(graph: FlowGraph) -> dict:
    """One ``sink`` label at each node an edge from a sink leaves."""
    feet = sorted({(e.source.position, e.source.height) for e in graph.edges if e.sink})
    return {"x": [x for x, _ in feet], "y": [y for _, y in feet], "text": ["sink"] * len(feet)}


def flow_check(flow: InformationFlow) -> str:
    """The exactness checks: the largest |sum of parts - whole| of the attention's and the MLP's sums."""
    return (f"<p class='flow-check'>Check: the parts sum to their whole to <b>{flow.attention_check:.1e}</b> "
            f"(attention: block input + bias + every head's part from every key) and <b>{flow.mlp_check:.1e}</b> "
            f"(MLP), the largest |parts − whole| over every block and position.</p>")


def flow_figure() -> tuple:
    """The empty route figure (``flow_graph``), its edge sources by style, its node and sink-label sources."""
    fig = readable_figure(name="flow_graph", height=560, title="Information flow", tools="pan,wheel_zoom,reset,save")
    edges, items = {}, []
    for kind, (color, label) in EDGE_STYLES.items():
        edges[kind] = ColumnDataSource(dict(EMPTY_EDGES), name=f"flow_edges_{kind}")
        renderer = fig.segment("x0", "y0", "x1", "y1", source=edges[kind], line_width="width", line_color=color,
                               line_alpha=0.75, name=f"flow_edges_{kind}")
        items.append(LegendItem(label=label, renderers=[renderer]))
    nodes = ColumnDataSource(dict(EMPTY_NODES), name="flow_nodes")
    circles = fig.scatter("x", "y", source=nodes, size=9, fill_color="color", line_color="white", name="flow_nodes")
    sinks = ColumnDataSource({"x": [], "y": [], "text": []}, name="flow_sink_labels")
    fig.text("x", "y", text="text", source=sinks, text_color=EDGE_STYLES["sink"][0], text_font_size="15px",
             x_offset=-14, y_offset=18, name="flow_sink_labels")
    moved = [r for r in fig.renderers if r.name in ("flow_edges_attention", "flow_edges_sink")]
    fig.add_tools(TapTool(renderers=moved))  # a click on an attention edge: the page opens that block and head
    fig.add_tools(HoverTool(renderers=[r for r in fig.renderers if r.name.startswith("flow_edges_")], tooltips=[
        ("route", "@kind"), ("from", "@source"), ("into", "@target"), ("share", "@share{0.000}"),
        ("heads", "@heads")]), HoverTool(renderers=[circles], tooltips=[("position", "@label"), ("stream", "@stage")]))
    fig.add_layout(Legend(items=items, label_text_font_size="15px", orientation="horizontal", name="flow_legend"),
                   "above")
    fig.xaxis.axis_label = "position"
    fig.yaxis.axis_label = "block (its output; after its attention half a row below)"
    fig.grid.visible = False
    return fig, edges, nodes, sinks


def position_options(tokens: list[str]) -> dict[str, int]:
    """``position:token`` for every position, the last first (the route into the next token)."""
    labels = {f"{p}:{visible_token(token)}": p for p, token in enumerate(tokens)}
    return dict(reversed(list(labels.items())))


class FlowView(pn.viewable.Viewer):
    """The routes into one position of an ``InformationFlow``, redrawn in place as the threshold or position
    changes."""

    threshold = param.Number(default=0.04, bounds=(0.0, 1.0))
    position = param.Integer(default=-1)

    def __init__(self, flow: InformationFlow, *, presenter: bool = False, **params):
        super().__init__(**params)
        self.flow, self.presenter = flow, presenter
        check_threshold(self.threshold)
        self.figure, self.edges, self.nodes, self.sinks = flow_figure()
        self.check = pn.pane.HTML(flow_check(flow))
        self.about = pn.pane.HTML("")
        self.threshold_slider = pn.widgets.FloatSlider.from_param(self.param.threshold, start=0.0, end=1.0,
                                                                  step=0.01, label="threshold", width=280)
        self.position_picker = pn.widgets.Select(label="into position", options=position_options(flow.tokens),
                                                 value=self.position % flow.seq_len, width=240)
        self.position_picker.param.watch(lambda event: setattr(self, "position", event.new), "value")
        self.param.watch(lambda _event: self.refresh(), ["threshold", "position"])
        self.refresh()

    def refresh(self) -> None:
        flow = self.flow
        self.graph = flow_graph(flow, self.position, self.threshold)
        for kind, columns in edge_columns(self.graph, flow.tokens).items():
            self.edges[kind].data = columns
        self.nodes.data = node_columns(self.graph, flow.tokens)
        self.sinks.data = sink_labels(self.graph)
        reached = sorted({node.position for node in self.graph.nodes})
        self.figure.x_range.update(start=-0.7, end=flow.seq_len - 0.3)
        self.figure.y_range.update(start=-0.3, end=flow.n_layers + 0.3)
        show_ticks(self.figure.xaxis, reached)
        self.figure.xaxis.major_label_overrides = token_axis_labels(flow.tokens, reached)
        show_ticks(self.figure.yaxis, spaced_ticks(flow.n_layers + 1))
        self.figure.yaxis.major_label_overrides = {0: "emb", **{b + 1: str(b) for b in range(flow.n_layers)}}
        target = self.graph.position
        self.figure.title.text = (f"Routes into {target}:{visible_token(flow.tokens[target])} · threshold "
                                  f"{self.graph.threshold:.2f} · {len(self.graph.edges)} edges · "
                                  f"{flow.seq_len} tokens")
        self.about.object = (f"<p class='flow-about'>{html.escape(flow.model_name)}: each edge is a part's share of "
                             f"the stream it is added into (L1 proximity), shares at or below the threshold dropped "
                             f"and the rest renormalized; only routes that reach position {target} are drawn.</p>")
        if self.presenter:
            enlarge_for_projector(self.figure)  # the new title wrapped to the projector's width

    def __panel__(self) -> pn.Column:
        return pn.Column(pn.FlexBox(self.threshold_slider, self.position_picker), self.about, self.check,
                         pn.pane.Bokeh(self.figure, sizing_mode="stretch_width"), sizing_mode="stretch_width")
