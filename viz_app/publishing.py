"""The one path by which a session's background work writes into its page's state: under the document's lock.

A write from an asyncio task outside the lock takes Panel's deferred path, in no set order with the page's own
writes. Here every write is a next-tick callback of the document, which Bokeh runs holding the lock, in the order
the writes were asked for. Without a served document (a notebook, a test) a write applies at once. This alone did
not end the page that stayed on "Running the prompt…": that was Panel's write queue stranding patches, mended in
``panel_internals.send_every_queued_patch``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from functools import partial

from panel.io.state import set_curdoc

from layouts.state import ExplorerState


class Publisher:
    """Writes into one page's state under its document's lock, and keeps its busy line (one entry per job)."""

    def __init__(self, state: ExplorerState, document=None):
        self.state, self.document = state, document
        self.doing: list[str] = []

    def apply(self, change: Callable[[], None]) -> None:
        """Run ``change`` holding the document's lock: on its next tick when served, else now."""
        if self.document is None or self.document.session_context is None:
            change()
            return
        self.document.add_next_tick_callback(partial(self._apply_as_page, change))

    def _apply_as_page(self, change: Callable[[], None]) -> None:
        """Bokeh holds the lock here; Panel must also know whose page this is to send the patches now."""
        with set_curdoc(self.document):
            change()

    def update(self, **values) -> None:
        self.apply(partial(self.state.param.update, **values))

    @contextmanager
    def showing(self, doing: str):
        """The busy line says ``doing`` during the ``with`` block, or what a job started later is doing; jobs nest
        and overlap, and the line clears when the last ends."""
        self.doing.append(doing)
        self.update(busy=doing)
        try:
            yield
        finally:
            self.doing.remove(doing)
            self.update(busy=self.doing[-1] if self.doing else "")
