"""The Flow tab (information flow): the page's run drawn by ``FlowView`` once its shares are traced, or why they are not
(a prompt too long for the graph's memory bound, an anatomy not decomposed yet)."""

from __future__ import annotations

import html
from functools import partial

import panel as pn

from .flow_view import FlowView
from .tab_view import TabView


class FlowTab(TabView):
    """Asks for the run's flow when shown and draws it; a new run's flow replaces the graph."""

    watches = ("run", "flow", "flow_note")

    def build(self) -> None:
        self.note = pn.pane.HTML("", sizing_mode="stretch_width")
        self.graph = pn.Column(sizing_mode="stretch_width")

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(self.note, self.graph, sizing_mode="stretch_width")

    def refresh(self) -> None:
        state = self.state
        if state.run is None:
            return
        if state.flow_note:
            self.note.object = f"<p class='flow-note'>{html.escape(state.flow_note)}</p>"
            self.graph.objects = []
            return
        if state.flow is None:
            self.note.object = "<p class='flow-note'>Tracing every part's share of the stream…</p>"
            state.param.trigger("flow_requested")
            return
        self.note.object = ""
        view = FlowView(state.flow, presenter=state.presenter)
        for kind in ("attention", "sink"):
            view.edges[kind].selected.on_change("indices", partial(self._on_edge_tap, view.edges[kind]))
        self.graph.objects = [view]

    def _on_edge_tap(self, edges, _attr, _old, new) -> None:
        if new:
            # Changing Panel and Bokeh models from inside a Bokeh callback: leave it to the next tick.
            pn.state.execute(partial(self.open_head_of, edges, new[0]), schedule=True)

    def open_head_of(self, edges, index: int) -> None:
        """Open the Attention tab at the clicked edge's block and its largest head; the click's selection is
        cleared, so the same edge clicked again opens it again."""
        edges.selected.indices = []
        layer, head = edges.data["layer"][index], edges.data["head"][index]
        self.state.attention_head = None  # the same head asked again still opens it
        self.state.param.update(layer=layer, attention_head=head, shown_tab="Attention")
