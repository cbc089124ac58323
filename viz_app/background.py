"""Starting coroutines from Panel callbacks without holding the page: each runs as its own task."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class BackgroundTasks:
    """Starts coroutines as tasks and keeps a reference to each until it ends (asyncio keeps only weak ones)."""

    def __init__(self):
        self.running: set[asyncio.Task] = set()

    def launcher(self, work: Callable[[], Awaitable[None]]) -> Callable[..., None]:
        """A callback that starts ``work`` as its own task and returns at once.

        A coroutine awaited inside a Bokeh callback holds the session's document lock until it ends, so clicks
        would queue behind a long run; a separate task releases it, and Panel schedules the task's updates.
        Where no loop runs (``panel serve --warm`` runs the page once at start-up) the work runs to the end,
        which loads the models before the first visitor comes.
        """
        def launch(*_event) -> None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                asyncio.run(work())
                return
            task = loop.create_task(work())
            self.running.add(task)
            task.add_done_callback(self.running.discard)
        return launch
