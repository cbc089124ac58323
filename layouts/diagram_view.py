"""The block diagram beside its pinned cards: clicking a box pins its card, a card's button unpins it."""

from __future__ import annotations

import panel as pn
import param

from .block_diagram import block_diagram
from .cards import part_card
from .tab_view import TabView


class DiagramView(TabView):
    """The diagram of the state's model with block ``state.layer`` open, and a card per pinned part."""

    def pin(self, part_id: str) -> None:
        """Pin a part's card (once); clicking a block in the chain also opens it."""
        pinned = self.state.pinned if part_id in self.state.pinned else [*self.state.pinned, part_id]
        layer = int(part_id.split(".")[1]) if part_id.startswith("block.") else self.state.layer
        self.state.param.update(pinned=pinned, layer=layer)

    def unpin(self, part_id: str) -> None:
        self.state.pinned = [p for p in self.state.pinned if p != part_id]

    @param.depends("state.run", "state.layer", "state.pinned", "state.shown_tab")
    def _diagram(self):
        self.skip_while_hidden()
        run = self.state.run
        if run is None or self.state.family is None:
            return pn.pane.Markdown("The diagram appears once a model has run a prompt.")
        layer = min(self.state.layer, run.n_layers - 1)
        return pn.pane.Bokeh(block_diagram(self.state.family, run.n_layers, layer, self.state.pinned, self.pin))

    @param.depends("state.run", "state.sinks", "state.pinned", "state.shown_tab")
    def _cards(self):
        self.skip_while_hidden()
        run = self.state.run
        if run is None or self.state.family is None:
            return pn.Spacer()
        cards = [part_card(part_id, self.state.family, run.n_layers, run, self.state.sinks, self.unpin)
                 for part_id in self.state.pinned]
        cards = [card for card in cards if card is not None]
        if not cards:
            return pn.pane.Markdown("Click a box in the diagram to pin its card here.", width=400)
        return pn.Column(*reversed(cards), scroll=True, height=600, width=460)

    def __panel__(self):
        return pn.Row(self._diagram, self._cards)
