"""Every use of Panel's private internals, each a workaround of a defect or a gap that Panel's public API leaves.

Panel is pinned to the minor version tested (``pyproject.toml``), and ``tests/test_panel_internals.py`` checks each
internal used here still has the shape relied on, and that each defect still reproduces: a test there fails when a
Panel release changes under a workaround or makes it unneeded.
"""

from __future__ import annotations

from panel.io import document
from panel.io.location import Location

_panel_dispatch_msgs = document._dispatch_msgs


async def dispatch_msgs_leaving_none(doc) -> None:
    """Panel's dispatch of queued patches, then a new one for any patches queued meanwhile that no task would send."""
    await _panel_dispatch_msgs(doc)
    if doc in document._WRITE_MSGS and doc not in document._WRITE_BLOCK:
        document._WRITE_BLOCK[doc] = True
        document._dispatch_write_task(doc, dispatch_msgs_leaving_none, doc)


def send_every_queued_patch() -> None:
    """Make sure no patch queued for a busy websocket is stranded (Panel 1.9's ``_dispatch_msgs``).

    Panel's dispatch task takes the queued messages, awaits their writes, then clears the document's write block.
    A patch queued during that await sets the block again and starts a second task; the first task then clears the
    block, and the second finds it clear and returns without sending. The patch waits until some later change starts
    a new task: a page stayed on "Running the prompt through …" with its run's message never shown. Minimal
    reproduction (``test_panel_strands_a_patch_queued_while_it_awaits_a_write``): queue one message, start
    ``_dispatch_msgs``, let its write's future resolve, queue a second message with ``_WRITE_BLOCK`` set and start a
    second task before the first resumes: the second message stays in ``_WRITE_MSGS``. Here each task, once done,
    starts another whenever messages were left queued without a block. Installed once per process: Panel's own
    tasks look the dispatcher up by its module name.
    """
    document._dispatch_msgs = dispatch_msgs_leaving_none


class PageLocation(Location):
    """Panel's Location without its query parsing, which runs on every change of the URL even when nothing syncs
    through it, and fails on values it guesses wrong.

    Minimal reproduction: ``Location().search = "?layer=²"`` raises ValueError (``"²".isdigit()`` is true, ``int("²")``
    fails), so a link with such a value, once Panel makes the page's Location from the request, fails the page's script:
    a blank page. Nothing syncs through this Location (``viz_app/url_state.py`` reads the URL itself), so its parsing is
    switched off; it is handed to the template through ``servable(location=...)``.
    """

    def _update_synced(self, event=None) -> None:
        """Nothing syncs through this Location."""


def tornado_application(doc):
    """The Tornado application serving ``doc``'s page, reached through the page's websocket; None where there is none
    (a notebook, or a session whose websocket is not open yet).

    Panel adds routes only when a server starts (``panel serve --plugins``, ``pn.serve(extra_patterns=...)``), and
    ``panel serve viz_app`` must offer the NPZ download with no extra option; a session's public context
    (``session_context.request``, ``.server_context``) does not lead to the Tornado application. This is the path
    Panel's own ``unlocked`` takes to the sockets it writes to.
    """
    session = getattr(doc.session_context, "_session", None) if doc is not None else None
    sockets = [connection._socket for connection in getattr(session, "_subscribed_connections", ())]
    return sockets[0].application if sockets else None
