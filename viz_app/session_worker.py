"""What a session's parts need to run model work for its page: one job at a time per page (``lock``), the page's
busy line while a job runs (``showing``), and a failure reported on the page instead of raised (``run``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from .failures import report_failure
from .jobs import Job
from .model_work import in_model_thread
from .publishing import Publisher


class SessionWorker:
    """The model work of one page: the controller, its tab jobs, lens, lessons and comparison share one."""

    def __init__(self, publisher: Publisher):
        self.publisher = publisher
        self.lock = asyncio.Lock()  # a page's jobs take the model threads one at a time
        self.showing = publisher.showing

    async def run(self, doing: str, function, *args, **kwargs):
        """``function(*args, **kwargs)`` on a shared model thread while the page says what it is doing; on failure
        report it and return None."""
        return await self.reporting(doing, in_model_thread(function, *args, **kwargs))

    async def run_if_current(self, job: Job, doing: str, function, *args, **kwargs):
        """``run`` for ``job`` once this page's earlier jobs have taken their turn, or None without running it if
        the job is no longer wanted by then."""
        async with self.lock:
            if not job.current:
                return None
            return await self.run(doing, function, *args, **kwargs)

    async def reporting(self, doing: str, work: Awaitable):
        """Await ``work`` while the page says what it is doing; on failure report it and return None."""
        with self.showing(doing):
            try:
                return await work
            except Exception as error:  # noqa: BLE001 - shown on the page, which stays usable
                report_failure(self.publisher, error)
                return None
