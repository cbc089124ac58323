"""Views that redraw only while their tab is shown, so that a run rebuilds one tab's figures, not six."""

from __future__ import annotations

import panel as pn
import param

from .state import ExplorerState


class TabView(pn.viewable.Viewer):
    """A view of ``state`` that keeps what it drew while another tab is shown (``state.shown_tab``).

    Outside tabs, in a notebook, ``shown_tab`` stays empty and the view always redraws.
    """

    state = param.ClassSelector(class_=ExplorerState)
    tab = param.String(default="", doc="the title of the tab that holds this view")

    def __init__(self, state: ExplorerState, **params):
        super().__init__(state=state, **params)

    def skip_while_hidden(self) -> None:
        """Keep the drawn content (Panel's Skip) while another tab is shown; it redraws once shown."""
        if self.state.shown_tab not in ("", self.tab):
            raise param.Skip
