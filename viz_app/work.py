"""The model work of a server process and of each page, as one call per job.

``ModelWork`` is the process's: the shared model threads (``model_work.py``) and one ``RunBatcher`` per shared
model and event loop; a served process is tuned once by ``server_tuning.tune_server_process``. ``PageWork`` is a
page's: its jobs, one at a time on the model threads, each started, turned, shown on the busy line, reported and
published by ``PageWork.run``. Where a Run click waits is drawn in ``docs/layout.md``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from model_backend.loaded_model import LoadedModel

from .failures import report_failure
from .jobs import Job
from .model_work import in_model_thread
from .publishing import Publisher
from .run_batches import RunBatcher

SHOWN = object()  # a job's run by default: the run its page shows when it starts


class ModelWork:
    """The model work of one process: every page's runs of one model on one event loop share a ``RunBatcher``."""

    def __init__(self):
        self.batchers: list[RunBatcher] = []

    def batcher(self, loaded: LoadedModel) -> RunBatcher:
        """The batcher of ``loaded`` on the running event loop (a loop that has closed keeps none)."""
        loop = asyncio.get_running_loop()
        self.batchers = [batcher for batcher in self.batchers if not batcher.loop.is_closed()]
        for batcher in self.batchers:
            if batcher.loaded is loaded and batcher.loop is loop:
                return batcher
        self.batchers.append(RunBatcher(loaded, loop))
        return self.batchers[-1]


@cache
def process_model_work() -> ModelWork:
    """This process's one ``ModelWork``, handed to every page it serves."""
    return ModelWork()


@dataclass(frozen=True)
class Done:
    """What ``PageWork.run`` gives back: the job, and its value once it ran (``ran``) or the error that stopped it."""

    job: Job
    value: object = None
    error: Exception | None = None
    ran: bool = False

    def publish(self, **values) -> None:
        """Write ``values`` into the page if the job is still current when the write is applied."""
        self.job.publish(**values)


class PageWork:
    """One page's model work: a new job cancels the page's job of its kind, waits for the page's turn (one job at a
    time per page), says what it does on the busy line, and reports a failure on the page instead of raising."""

    def __init__(self, model_work: ModelWork, publisher: Publisher):
        self.model_work, self.publisher = model_work, publisher
        self.turn = asyncio.Lock()
        self.latest: dict[str, Job] = {}

    def start(self, kind: str, run=SHOWN, wanted: Callable[[], bool] = lambda: True) -> Job:
        """A new job of ``kind`` on ``run`` (the run shown by default; None for a job that makes a run), superseding
        the one before."""
        self.cancel(kind)
        self.latest[kind] = Job(self.publisher, kind, self.publisher.state.run if run is SHOWN else run, wanted)
        return self.latest[kind]

    def cancel(self, *kinds: str) -> None:
        """Cancel the running jobs of ``kinds`` (every kind when none is named)."""
        for kind in kinds or list(self.latest):
            if kind in self.latest:
                self.latest[kind].cancel()

    async def run(self, job: str | Job, doing: str | None, function, *args, for_run=SHOWN,
                  wanted: Callable[[], bool] = lambda: True, gives_way: bool = False, reports: bool = True,
                  **kwargs) -> Done:
        """``function(*args, **kwargs)`` for a job: a new one of that kind (on ``for_run``, while ``wanted``), or a
        ``Job`` going on with its next step. A plain function runs on a model thread, a coroutine function on the
        loop (a batched run). With ``doing`` it takes the page's turn and shows ``doing`` meanwhile, and is skipped
        if the job is no longer current by then; without it (work nobody waits for yet) it does neither and
        reports nothing. ``gives_way``: the function stops by itself when another job waits (``model_work.py``)."""
        if isinstance(job, str):
            job = self.start(job, for_run, wanted)
        if doing is None:
            return await self.computed(job, function, args, kwargs, gives_way, reports=False)
        async with self.turn:
            if not job.current:
                return Done(job)
            with self.publisher.showing(doing):
                return await self.computed(job, function, args, kwargs, gives_way, reports)

    async def computed(self, job: Job, function, args, kwargs, gives_way: bool, reports: bool) -> Done:
        """The job's function computed, or the error that stopped it (shown on the page when ``reports``)."""
        try:
            if inspect.iscoroutinefunction(function):
                value = await function(*args, **kwargs)
            else:
                value = await in_model_thread(function, *args, gives_way=gives_way, **kwargs)
        except Exception as error:  # noqa: BLE001 - shown on the page, which stays usable
            if reports:
                report_failure(self.publisher, error)
            return Done(job, error=error)
        return Done(job, value, ran=True)
