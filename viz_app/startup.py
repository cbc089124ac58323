"""The first moments of a page: show it at once, then import the model libraries and load the models.

Importing torch and transformers takes seconds on a cold server; a visitor should see the page and what it is
loading meanwhile, so the controller (``viz_app.session``, which imports them) is made only once the page is shown.
"""

from __future__ import annotations

import asyncio
import gc
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


def starting_up() -> bool:
    """Whether this is ``panel serve --warm`` running the page once before the server starts: no event loop runs yet
    (a served page's script runs inside the server's loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


def load_models_beyond_gc(sources: list[str]) -> None:
    """``panel serve --warm``: load every model now, then move everything alive out of the garbage collector's scans.

    A full collection walks every tracked object while it holds the interpreter, so the event loop waits: the model
    libraries and models alone are hundreds of thousands of objects, and collections come every few seconds while pages
    are made (``benchmarks/fuzz_server.py`` measures the longest stall). They live as long as the server, so
    ``gc.freeze`` leaves them out of every later collection. Done before any page is made, so no page's objects are
    frozen (a frozen cycle would never be freed).
    """
    models = import_module("viz_app.models")
    for source in sources:
        models.shared_model(source)
    gc.collect()
    gc.freeze()
