"""The block diagram beside its pinned cards: clicking a box pins its card, a card's button unpins it."""

from __future__ import annotations

import panel as pn

from model_backend.part_descriptions import part_descriptions

from .block_diagram import block_diagram, edge_widths
from .cards import CARD_WIDTH, PartCard
from .diagram_parts import parse_part_id
from .highlight import marks_for, part_boxes, show_highlight
from .tab_view import TabView

CARDS_PER_REFRESH = 1  # a card is a figure and its text, made and filled on the event loop


class DiagramView(TabView):
    """The diagram of the state's model with block ``state.layer`` open, and a card per pinned part.

    The figure is drawn again only when the model or the open block changes; pins and runs update it in place.
    """

    watches = ("run", "sinks", "layer", "pinned", "family", "highlight")

    def build(self) -> None:
        self.diagram = pn.pane.Bokeh()
        self.drawn_for = None
        self.cards: dict[str, PartCard] = {}
        self.descriptions = {}
        self.hint = pn.pane.Markdown("The diagram appears once a model has run a prompt.", width=400)
        self.card_column = pn.Column(scroll=True, height=600, width=CARD_WIDTH + 20)

    def pin(self, part_id: str) -> None:
        """Pin a part's card (once); clicking a block in the chain also opens it."""
        pinned = self.state.pinned if part_id in self.state.pinned else [*self.state.pinned, part_id]
        layer = int(part_id.split(".")[1]) if part_id.startswith("block.") else self.state.layer
        self.state.param.update(pinned=pinned, layer=layer)

    def unpin(self, part_id: str) -> None:
        self.state.pinned = [p for p in self.state.pinned if p != part_id]

    def refresh(self) -> None:
        run, family = self.state.run, self.state.family
        if run is None or family is None:
            return
        layer = min(self.state.layer, run.n_layers - 1)
        drawn_for = (family.name, run.n_layers, layer)
        if drawn_for != self.drawn_for:
            self.drawn_for = drawn_for
            self.cards.clear()
            self.descriptions = part_descriptions(family, run.n_heads, run.n_kv_heads)
            self.diagram.object = block_diagram(family, run.n_layers, layer, self.state.pinned, self.pin,
                                                self.descriptions)
            self.parts = self.diagram.object.select_one({"name": "block_diagram_parts"})
        else:
            edges = edge_widths(self.parts.data["part"], self.state.pinned, layer)
            if edges != list(self.parts.data["edge"]):
                self.parts.patch({"edge": [(slice(None), edges)]})
        show_highlight(self.diagram.object, part_boxes(marks_for(self.state, "block_diagram"), self.parts.data))
        self.show_cards(run)
        self.hint.object = "" if self.cards else "Click a box in the diagram to pin its card here."

    def show_cards(self, run) -> None:
        """Keep one card per pinned part, newest first, each filled with the current run (a part pinned twice has
        one card).

        At most ``CARDS_PER_REFRESH`` cards are made or filled per refresh, the newest first; the view asks for
        another refresh for the rest: a link can pin many cards, and making them all in one call would hold the
        server's event loop, every other page waiting (``benchmarks/fuzz_server.py`` measures the longest stall).
        """
        family = self.state.family
        pinned = [p for p in dict.fromkeys(self.state.pinned) if parse_part_id(p, family, run.n_layers) is not None]
        budget, cards, later = CARDS_PER_REFRESH, {}, False
        for part_id in reversed(pinned):
            card = self.cards.get(part_id)
            if card is not None and card.shows(run, self.state.sinks):
                cards[part_id] = card
            elif budget:
                budget -= 1
                card = card or PartCard(part_id, family, run.n_layers, self.unpin, self.descriptions)
                card.show(run, self.state.sinks)
                cards[part_id] = card
            else:
                later = True
                if card is not None:
                    cards[part_id] = card  # still the previous run's figures, until its turn
        self.cards = cards
        layouts = [cards[p].layout for p in reversed(pinned) if p in cards]
        if [id(card) for card in self.card_column.objects] != [id(card) for card in layouts]:
            self.card_column.objects = layouts
        if later:
            self.request_refresh()

    def layout(self):
        return pn.FlexBox(self.diagram, pn.Column(self.hint, self.card_column))
