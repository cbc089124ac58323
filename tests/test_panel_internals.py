"""Panel's internals that ``viz_app/panel_internals.py`` works around: each still has the shape relied on, and each
upstream defect still reproduces. A failure here means a Panel release changed under a workaround (mend it) or made
it unneeded (remove it)."""

from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace
from weakref import WeakKeyDictionary

import pytest
from bokeh.document import Document
from conftest import run_coroutine
from panel.io import document as panel_document
from panel.io.location import Location

from viz_app import panel_internals
from viz_app.panel_internals import PageLocation, dispatch_msgs_leaving_none, tornado_application


class HeldSocket:
    """A socket whose every write waits until the test resolves it; registered as an extra Panel socket type."""

    def __init__(self):
        self.sent, self.writes = [], []


class HeldConnection:
    """A server connection as Panel's dispatch sees one: a key of the queue, with a socket."""

    def __init__(self):
        self._socket = HeldSocket()


def hold_write(connection, msg=None):
    future = asyncio.get_running_loop().create_future()
    connection._socket.sent.append(msg)
    connection._socket.writes.append(future)
    return [future]


@pytest.fixture
def held_connection(monkeypatch):
    monkeypatch.setitem(panel_document.extra_socket_handlers, HeldSocket, hold_write)
    return HeldConnection()


def queue(doc, connection, message) -> None:
    """What ``schedule_write_events`` does for a patch, without building a Bokeh protocol message."""
    panel_document._WRITE_BLOCK[doc] = True
    panel_document._WRITE_MSGS.setdefault(doc, {}).setdefault(connection, []).append(message)


async def second_patch_during_a_write(dispatch, connection) -> list:
    """One patch queued and its write started; the write ends, and a second patch is queued (and its task started)
    before the first task resumes. Returns every message sent."""
    doc = Document()
    queue(doc, connection, "first")
    first = asyncio.ensure_future(dispatch(doc))
    await asyncio.sleep(0)
    connection._socket.writes[0].set_result(None)
    queue(doc, connection, "second")
    panel_document._dispatch_write_task(doc, dispatch, doc)
    await first
    for _ in range(5):
        await asyncio.sleep(0)
        for write in connection._socket.writes:
            write.done() or write.set_result(None)
    panel_document._WRITE_MSGS.pop(doc, None)
    panel_document._WRITE_BLOCK.pop(doc, None)
    return connection._socket.sent


def test_the_write_queue_internals_have_the_shape_relied_on():
    for table in ("_WRITE_MSGS", "_WRITE_BLOCK"):
        assert isinstance(getattr(panel_document, table), WeakKeyDictionary)
    assert inspect.iscoroutinefunction(panel_internals._panel_dispatch_msgs)
    assert list(inspect.signature(panel_internals._panel_dispatch_msgs).parameters) == ["doc"]
    assert list(inspect.signature(panel_document._dispatch_write_task).parameters) == ["doc", "func", "args", "kwargs"]
    assert "_dispatch_msgs(doc)" in inspect.getsource(panel_document.schedule_write_events).replace(", doc)", "(doc)")


def test_panel_strands_a_patch_queued_while_it_awaits_a_write(held_connection):
    """The upstream defect: the second patch is never sent. Once Panel sends it, remove the workaround."""
    sent = run_coroutine(second_patch_during_a_write(panel_internals._panel_dispatch_msgs, held_connection))
    assert sent == ["first"]


def test_the_workaround_sends_the_stranded_patch(held_connection):
    sent = run_coroutine(second_patch_during_a_write(dispatch_msgs_leaving_none, held_connection))
    assert sent == ["first", "second"]


def test_panel_location_fails_on_a_value_it_guesses_as_a_number():
    """The upstream defect: Panel's Location parses the query on every change and ``int("²")`` fails."""
    with pytest.raises(ValueError):
        Location().search = "?layer=²"
    assert "_update_synced" in vars(Location) and "search" in inspect.getsource(Location.__init__)


def test_the_page_location_takes_any_query():
    location = PageLocation()
    location.search = "?layer=²&prompt=%7Bnot+json"
    assert location.search == "?layer=²&prompt=%7Bnot+json"


def test_a_session_reaches_its_tornado_application_through_its_websocket():
    application = object()
    connection = SimpleNamespace(_socket=SimpleNamespace(application=application))
    doc = SimpleNamespace(session_context=SimpleNamespace(_session=SimpleNamespace(
        _subscribed_connections=[connection])))
    assert tornado_application(doc) is application
    assert tornado_application(None) is None
    assert tornado_application(SimpleNamespace(session_context=None)) is None


def test_bokeh_session_internals_the_npz_route_follows_exist():
    from bokeh.server.connection import ServerConnection
    from bokeh.server.contexts import BokehSessionContext
    from bokeh.server.session import ServerSession
    assert "_session" in inspect.getsource(BokehSessionContext.__init__)
    assert "_subscribed_connections" in inspect.getsource(ServerSession.__init__)
    assert "_socket" in inspect.getsource(ServerConnection.__init__)
