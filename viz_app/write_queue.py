"""A fix for Panel 1.9's queue of patches waiting for a busy websocket, which can strand the last patches of a burst.

Panel's ``_dispatch_msgs`` task takes the queued messages, awaits their writes, then clears the document's write
block. A patch queued during that await sets the block again and starts a second task; the first task then clears
the block, and the second finds it clear and returns without sending. The patches wait until some later change
starts a new task: a page stayed on "Running the prompt through …" with its run's message never shown (1 of 6
runs of the 20-prompt browser test under two busy processes). Here each task, once done, starts another whenever
messages were left queued without a block.
"""

from __future__ import annotations

from panel.io import document

_panel_dispatch_msgs = document._dispatch_msgs


async def dispatch_msgs_leaving_none(doc) -> None:
    """Panel's dispatch, then a new one for any messages queued meanwhile that no task would send."""
    await _panel_dispatch_msgs(doc)
    if doc in document._WRITE_MSGS and doc not in document._WRITE_BLOCK:
        document._WRITE_BLOCK[doc] = True
        document._dispatch_write_task(doc, dispatch_msgs_leaving_none, doc)


def send_every_queued_patch() -> None:
    """Install the fix once per process (Panel's own tasks look the dispatcher up by its module name)."""
    document._dispatch_msgs = dispatch_msgs_leaving_none
