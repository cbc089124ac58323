"""Two threads for the model work of every session in this server process: a job alone runs on every core, and
when others wait, two jobs run side by side on one core each.

Torch spreads each operation over OpenMP threads that meet at a barrier after every operation. When more threads
want the cores than there are cores (the event loop serializing other students' pages, a second pass), the
descheduled thread holds up every barrier: under a few students, six default worker threads made a short pass many
times slower. Two single-core passes side by side never wait for each other, and the event loop then slows one of
them a little instead of stalling both cores' barriers (``benchmarks/classroom_load.py`` measures the class's p95;
``benchmarks/README.md`` has the figures with one thread and with two). The hooks of concurrent passes on one
model stay apart: each acts only in the thread that registered it (``model_backend/hooks.py``).

A job that gives way (``gives_way``: a logit-lens read given ``keep_reading``) is work nobody waits for yet: it runs
on one core, leaving the other to the event loop and the browser drawing the run, and stops at its next boundary
group when another job waits, so it does not count against that job's cores. Once somebody waits for it
(``stop_giving_way``, from inside it), it counts as any job and takes every core when alone.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import torch

ALL_CORES = torch.get_num_threads()
MODEL_THREADS = ThreadPoolExecutor(max_workers=min(2, ALL_CORES), thread_name_prefix="model-work")
_unfinished: set[Future] = set()
_giving_way: set[Future] = set()  # unfinished jobs that stop for any other job
_counting = threading.Lock()
_this_job = threading.local()  # the future of the job a model thread runs


def _forget(job: Future) -> None:
    """Drop a job that ended, failed or was cancelled before it started from the unfinished ones."""
    with _counting:
        _unfinished.discard(job)
        _giving_way.discard(job)


def _run_with_fitting_threads(function, args, kwargs, counted: list[Future]):
    """Run one job on every core when it is alone (or beside jobs that give way to it), else on one core; a job that
    gives way always on one core. ``counted`` holds the job's future once the submitter has counted it."""
    with _counting:  # waits until the submitter has counted this job
        _this_job.future = counted[0]
    _fit_threads()
    return function(*args, **kwargs)


def _fit_threads() -> None:
    """Set this model thread's torch threads for its job, given the jobs running and waiting now."""
    with _counting:
        crowded = _this_job.future in _giving_way or len(_unfinished - _giving_way) > 1
    torch.set_num_threads(1 if crowded else ALL_CORES)


def stop_giving_way() -> None:
    """From inside a job that gave way until now: somebody waits for it. It counts as any other job from here on and
    takes every core when alone, for the rest of its run. Outside a model thread it does nothing."""
    if getattr(_this_job, "future", None) is None:
        return
    with _counting:
        _giving_way.discard(_this_job.future)
    _fit_threads()


def alone_in_model_threads() -> bool:
    """Whether the job asking is the only one running or waiting (asked from inside a job)."""
    return len(_unfinished) <= 1


def models_idle() -> bool:
    """Whether no model job is running or waiting: the moment for work nobody waits for yet."""
    return not _unfinished


async def in_model_thread(function, *args, gives_way: bool = False, **kwargs):
    """``function(*args, **kwargs)`` run on a shared model thread, awaited without holding the event loop;
    ``gives_way`` for work that stops by itself when another job waits (a lens read given ``keep_reading``)."""
    counted = []
    with _counting:
        job = MODEL_THREADS.submit(_run_with_fitting_threads, function, args, kwargs, counted)
        counted.append(job)
        _unfinished.add(job)
        if gives_way:
            _giving_way.add(job)
    job.add_done_callback(_forget)
    return await asyncio.wrap_future(job)
