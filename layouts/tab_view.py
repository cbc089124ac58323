"""Views that build their figures once and update them in place, and only while their tab is shown."""

from __future__ import annotations

import panel as pn
import param

from .state import ExplorerState


class TabView(pn.viewable.Viewer):
    """A view of ``state`` whose figures are made once and refreshed in place (new data, same Bokeh models).

    A subclass lists what it draws from in ``watches`` (state parameters) and ``own_watches`` (its own), and
    implements ``refresh``. A change while another tab is shown only marks the view stale: it refreshes once its
    tab is shown. Outside tabs, in a notebook, ``shown_tab`` stays empty and the view always refreshes.
    """

    state = param.ClassSelector(class_=ExplorerState)
    tab = param.String(default="", doc="the title of the tab that holds this view")

    watches: tuple[str, ...] = ("run",)
    own_watches: tuple[str, ...] = ()

    def __init__(self, state: ExplorerState, **params):
        super().__init__(state=state, **params)
        self._stale = True
        self._refresh_scheduled = False
        self.state.param.watch(self.request_refresh, list(self.watches))
        if self.own_watches:
            self.param.watch(self.request_refresh, list(self.own_watches))
        self.state.param.watch(self._refresh_on_show, "shown_tab")

    @property
    def is_shown(self) -> bool:
        return self.state.shown_tab in ("", self.tab)

    def request_refresh(self, *_events) -> None:
        """Refresh soon if shown, else remember to when the tab is opened."""
        self._stale = True
        self._refresh_if_stale()

    def _refresh_if_stale(self, *_events) -> None:
        """Refresh under the document's lock (raw Bokeh models may only change there), once per burst of changes."""
        if self._stale and self.is_shown and not self._refresh_scheduled:
            self._refresh_scheduled = True
            pn.state.execute(self._refresh_now, schedule=True)

    def _refresh_on_show(self, *_events) -> None:
        """A tab switch comes from a click, inside the document's lock: refresh right there, without waiting a tick."""
        if self._stale and self.is_shown:
            self._refresh_now()

    def _refresh_now(self) -> None:
        self._refresh_scheduled = False
        if self._stale and self.is_shown:
            self._stale = False
            self.refresh()

    def refresh(self) -> None:
        """Put the state's current results into the figures (implemented by each view)."""
        raise NotImplementedError
