"""Two threads for the model work of every session in this server process, and only one of them ever computes on
several cores: a job alone there runs on every core; a job that comes while it runs goes beside it, on one core.

Torch spreads an operation over the OpenMP workers of the thread that runs it, and GNU OpenMP keeps a team of them
for every thread that has run an operation on several cores. Once a process keeps more of those workers than it has
cores, every team's workers sleep between operations instead of spinning, and each operation then waits for them
to wake: a pass of small operations in a thread of its own then runs far slower than in the main thread
(``benchmarks/model_thread_forward.py`` measures both; docs/performance.md has the figures). So the wide model
thread is the only thread whose torch operations use several cores; the thread beside it, a model's load and the
main thread compute on one core (``on_one_core``).

Torch's workers meet at a barrier after every operation. When more threads want the cores than there are cores
(the event loop serializing other students' pages, a second pass), the descheduled thread holds up every barrier:
two jobs side by side therefore run on one core each (``benchmarks/classroom_load.py`` measures the class's p95).
The hooks of concurrent passes on one model stay apart: each acts only in the thread that registered it
(``model_backend/hooks.py``).

A job that gives way (``gives_way``: a logit-lens read given ``keep_reading``) is work nobody waits for yet: it runs
on one core, leaving the other to the event loop and the browser drawing the run, and stops at its next boundary
group when another job waits, so it does not count against that job's cores. Once somebody waits for it
(``stop_giving_way``, from inside it), it counts as any job and takes every core when alone in the wide thread.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import torch

ALL_CORES = torch.get_num_threads()
WIDE_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model-work")
BESIDE_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model-work-beside") if ALL_CORES > 1 else None
MODEL_THREAD_COUNT = 1 if BESIDE_THREAD is None else 2
_unfinished: set[Future] = set()
_in_wide_thread: set[Future] = set()  # unfinished jobs given to the wide thread
_giving_way: set[Future] = set()  # unfinished jobs that stop for any other job
_counting = threading.Lock()
_this_job = threading.local()  # the future of the job a model thread runs, and whether that thread is the wide one


def on_one_core(function, *args, **kwargs):
    """``function(*args, **kwargs)`` with this thread's torch operations on one core: for torch work outside the
    model threads (a model's load), which must not start a team of OpenMP workers of its own."""
    compute_on_one_core_in_this_thread()
    return function(*args, **kwargs)


def compute_on_one_core_in_this_thread() -> None:
    """Keep the calling thread's torch operations on one core from now on (the server's main thread)."""
    torch.set_num_threads(1)


def _forget(job: Future) -> None:
    """Drop a job that ended, failed or was cancelled before it started from the unfinished ones."""
    with _counting:
        _unfinished.discard(job)
        _in_wide_thread.discard(job)
        _giving_way.discard(job)


def _run_with_fitting_threads(function, args, kwargs, counted: list[Future], wide: bool):
    """Run one job on every core when it is alone in the wide thread (or beside jobs that give way to it), else on
    one core; a job that gives way always on one core. ``counted`` holds the job's future once the submitter has
    counted it."""
    with _counting:  # waits until the submitter has counted this job
        _this_job.future, _this_job.wide = counted[0], wide
    try:
        _fit_threads()
        return function(*args, **kwargs)
    finally:  # the thread forgets the job: its future holds the result, which must not outlive its pages
        with _counting:
            _this_job.future = None


def _fit_threads() -> None:
    """Set this model thread's torch threads for its job, given the jobs running and waiting now."""
    with _counting:
        crowded = (not _this_job.wide or _this_job.future in _giving_way
                   or len(_unfinished - _giving_way) > 1)
    torch.set_num_threads(1 if crowded else ALL_CORES)


def _thread_for_next_job() -> ThreadPoolExecutor:
    """The wide thread, unless it has more jobs running or waiting than the thread beside it, not counting those
    that give way (they stop at their next step for the new job); called counting."""
    wide = len(_in_wide_thread - _giving_way)
    beside = len(_unfinished - _in_wide_thread - _giving_way)
    return BESIDE_THREAD if BESIDE_THREAD is not None and wide > beside else WIDE_THREAD


def stop_giving_way() -> None:
    """From inside a job that gave way until now: somebody waits for it. It counts as any other job from here on and
    takes every core when alone in the wide thread, for the rest of its run. Outside a model thread it does
    nothing."""
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
        thread = _thread_for_next_job()
        job = thread.submit(_run_with_fitting_threads, function, args, kwargs, counted, thread is WIDE_THREAD)
        counted.append(job)
        _unfinished.add(job)
        if thread is WIDE_THREAD:
            _in_wide_thread.add(job)
        if gives_way:
            _giving_way.add(job)
    job.add_done_callback(_forget)
    return await asyncio.wrap_future(job)
