"""One thread for the model work of every session in this server process; a small model's work runs on one core
while other sessions' work waits.

Torch spreads each operation over OpenMP threads that meet at a barrier after every operation. When more threads
want the cores than there are cores (six default worker threads of two OpenMP threads each, plus the event loop
serializing figures), a descheduled thread holds every barrier: the demo model's 25 ms pass took 0.3 to 7 s under
ten students. Queued on one thread, passes no longer fight each other. A model whose operations take microseconds
(the demo model) still loses most of its time at the barriers while the event loop is busy, so it runs on one core
while others wait (30 students: p95 1.9 s against 3.5 s on every core); a GPT-2-small-sized model's operations
are long enough that every core pays (30 students: p95 9.7 s against 11.2 s on one core).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

ALL_CORES = torch.get_num_threads()
SMALL_MODEL_WIDTH = 512  # residual width below which a crowd's passes run on one core each
MODEL_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model-work")
_pending = 0
_counting = threading.Lock()


def _count_pending(change: int) -> int:
    """Add ``change`` to the number of submitted jobs not yet finished, and return the new number."""
    global _pending
    with _counting:
        _pending += change
        return _pending


def _run_with_fitting_threads(function, args, kwargs, width: int):
    """Run one job on one core when it is a small model's and others are waiting behind it, else on every core."""
    crowded = _count_pending(0) > 1
    torch.set_num_threads(1 if crowded and width < SMALL_MODEL_WIDTH else ALL_CORES)
    try:
        return function(*args, **kwargs)
    finally:
        _count_pending(-1)


async def in_model_thread(function, *args, width: int, **kwargs):
    """``function(*args, **kwargs)`` run on the shared model thread, for a model of residual ``width``, awaited
    without holding the event loop."""
    _count_pending(+1)
    return await asyncio.get_running_loop().run_in_executor(MODEL_THREAD, _run_with_fitting_threads, function,
                                                            args, kwargs, width)
