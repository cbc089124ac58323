"""The first moments of a page: show it at once, then import the model libraries and load the models.

Importing torch and transformers takes seconds on a cold server; a visitor should see the page and what it is
loading meanwhile, so the controller (``viz_app.session``, which imports them) is made only once the page is shown.
"""

from __future__ import annotations

import asyncio
from importlib import import_module

from layouts.state import ExplorerState

from .publishing import Publisher


class DeferredSession:
    """Holds the page's state until the controller exists, then hands every request to it."""

    def __init__(self, sources: list[str], state: ExplorerState, document=None):
        self.sources, self.state, self.document, self.session = sources, state, document, None

    async def start(self) -> None:
        """Import the controller off the event loop, then let it load the models and run the first prompt."""
        Publisher(self.state, self.document).update(busy="Loading the model libraries (torch, transformers)…")
        session_module = await asyncio.to_thread(import_module, "viz_app.session")
        self.session = session_module.ExplorerSession(self.sources, self.state, self.document)
        await self.session.start()

    def stop_jobs(self) -> None:
        """Stop the controller's long jobs once the page is closed: nobody will see them."""
        if self.session is not None:
            self.session.stop_jobs()
