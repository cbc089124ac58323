"""The one path by which a session's background work writes into its page's state: under the document's lock.

A write from an asyncio task outside the lock takes Panel's deferred path, in no set order with the page's own
writes. Here the writes are applied by a next-tick callback of the document, which Bokeh runs holding the lock, in the
order they were asked for; the writes asked before that tick are applied together, their changes sent to the browser as
one message (each message's serializer indexes every model of the page: a classroom's runs, each sending its own
busy lines, panes and URL one message at a time, held the event loop for every other student's page;
``benchmarks/classroom_load.py`` measures the class's p95). Without a served document (a notebook, a test) a write
applies at once. This alone did
not end the page that stayed on "Running the prompt…": that was Panel's write queue stranding patches, mended in
``panel_internals.send_every_queued_patch``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import contextmanager
from functools import partial

from panel.io import unlocked
from panel.io.state import set_curdoc

from layouts.state import ExplorerState
from layouts.tab_view import refresh_asked_views

log = logging.getLogger(__name__)

BROWSER_DRAWING_SECONDS = 0.2  # about how long a browser takes to draw a run of several hundred tokens, on two cores


class Publisher:
    """Writes into one page's state under its document's lock, and keeps its busy line (one entry per job)."""

    def __init__(self, state: ExplorerState, document=None):
        self.state, self.document = state, document
        self.doing: list[str] = []
        self.waiting: list[Callable[[], None]] = []  # changes asked and not yet applied, in order

    def apply(self, change: Callable[[], None]) -> None:
        """Run ``change`` holding the document's lock: on its next tick when served (with every change asked before
        that tick), else now."""
        if self.document is None or self.document.session_context is None:
            change()
            return
        self.waiting.append(change)
        if len(self.waiting) == 1:
            self.document.add_next_tick_callback(self._apply_waiting)

    def _apply_waiting(self) -> None:
        """Bokeh holds the lock here; Panel must also know whose page this is, and holds the changes' events until
        the last is applied and the views shown have redrawn from them, then sends them as one message. A change that
        fails is logged; the others still apply."""
        changes, self.waiting = self.waiting, []
        with set_curdoc(self.document), unlocked():
            for change in changes:
                try:
                    change()
                except Exception:  # noqa: BLE001 - one failed write must not drop the others of its tick
                    log.exception("a write into the page's state failed")
            refresh_asked_views(self.document)

    def update(self, **values) -> None:
        self.apply(partial(self.state.param.update, **values))

    def after_sent(self, work: Callable[[], None], delay: float = 0.0) -> None:
        """Run ``work`` on the event loop once the changes asked so far are applied and sent to the browser, and
        ``delay`` seconds more (at once without a served document): model work started sooner would take the cores
        and the interpreter from the event loop serializing them and from the browser drawing them."""
        if self.document is None or self.document.session_context is None:
            work()
            return
        self.apply(lambda: asyncio.get_running_loop().call_later(delay, work))

    async def sent(self, delay: float = 0.0) -> None:
        """Wait until the changes asked so far are applied and sent to the browser, and ``delay`` seconds more
        (``after_sent``)."""
        done = asyncio.get_running_loop().create_future()
        self.after_sent(lambda: done.done() or done.set_result(None), delay=delay)
        await done

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
