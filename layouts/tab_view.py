"""Views that build their figures when first shown, then update them in place, and only while their tab is shown."""

from __future__ import annotations

from weakref import WeakKeyDictionary

import panel as pn
import param
from bokeh.plotting import figure

from .state import ExplorerState
from .style import enlarge_for_projector

_asked: WeakKeyDictionary = WeakKeyDictionary()  # document -> its views whose refresh waits for a next tick


def refresh_asked_views(document) -> None:
    """Refresh now, not on a next tick, the views of ``document`` that asked for it: for a writer that holds the
    document's lock and Panel's hold over a burst of changes, so that the views' changes go to the browser in the
    burst's one message instead of a message of their own (``benchmarks/classroom_load.py`` measures a class's
    runs)."""
    for view in list(_asked.pop(document, ())):
        view._refresh_now()


class TabView(pn.viewable.Viewer):
    """A view of ``state`` whose figures are made once and refreshed in place (new data, same Bokeh models).

    A subclass lists what it draws from in ``watches`` (state parameters) and ``own_watches`` (its own), and
    implements ``build`` (make the figures and widgets), ``layout`` (arrange them) and ``refresh``. A change while
    another tab is shown only marks the view stale: it refreshes once its tab is shown. A view is built the first
    time it is shown, and filled before it is handed to the page, so a page opens with one tab's figures, not all
    of them, and each arrives with its data. Outside tabs, in a notebook, ``shown_tab`` stays empty and the view is
    built and refreshed at once.
    """

    state = param.ClassSelector(class_=ExplorerState)
    tab = param.String(default="", doc="the title of the tab that holds this view")

    watches: tuple[str, ...] = ("run",)
    own_watches: tuple[str, ...] = ()

    def __init__(self, state: ExplorerState, **params):
        super().__init__(state=state, **params)
        self._stale = True
        self._refresh_scheduled = False
        self._built = False
        self._page = pn.Column(sizing_mode="stretch_width")
        self.state.param.watch(self.request_refresh, list(self.watches))
        if self.own_watches:
            self.param.watch(self.request_refresh, list(self.own_watches))
        self.state.param.watch(self._refresh_on_show, "shown_tab")
        self.request_refresh()

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
            if (document := pn.state.curdoc) is not None:
                _asked.setdefault(document, set()).add(self)
            pn.state.execute(self._refresh_now, schedule=True)

    def _refresh_on_show(self, *_events) -> None:
        """A tab switch comes from a click, inside the document's lock: refresh right there, without waiting a tick."""
        if self._stale and self.is_shown:
            self._refresh_now()

    def _refresh_now(self) -> None:
        """Build if needed and refresh, sending every change through Panel's ordered write queue (``unlocked``).

        Panel queues its own changes (the message that first brings a tab's figures) while the browser's socket is
        busy; a raw Bokeh change sent by Bokeh's own path could overtake that queue, and the browser would fail
        with "reference isn't known" on a figure it has not received yet.
        """
        for views in _asked.values():
            views.discard(self)
        self._refresh_scheduled = False
        if not (self._stale and self.is_shown):
            return
        self._stale = False
        with pn.io.unlocked():
            if not self._built:
                self._built = True
                self.build()
                self.refresh()
                layout = self._enlarge_if_presenting(self.layout())
                self._page.objects = [layout]
            else:
                self.refresh()
                self._enlarge_if_presenting(self._page)

    def _enlarge_if_presenting(self, layout: pn.viewable.Viewable) -> pn.viewable.Viewable:
        """In presenter mode, every figure in ``layout`` gets the projector's sizes (new figures included)."""
        if self.state.presenter:
            for pane in layout.select(pn.pane.Bokeh):
                if isinstance(pane.object, figure):
                    enlarge_for_projector(pane.object)
        return layout

    def build(self) -> None:
        """Make the view's figures and widgets, empty (implemented by each view)."""
        raise NotImplementedError

    def layout(self) -> pn.viewable.Viewable:
        """Arrange what ``build`` made (implemented by each view)."""
        raise NotImplementedError

    def refresh(self) -> None:
        """Put the state's current results into the figures (implemented by each view)."""
        raise NotImplementedError

    def __panel__(self) -> pn.Column:
        return self._page
