"""One thread for the model work of every session in this server process, which runs torch on one core while
other sessions' work waits.

Torch spreads each operation over OpenMP threads that meet at a barrier after every operation. When more threads
want the cores than there are cores (six default worker threads of two OpenMP threads each, plus the event loop
serializing other sessions' figures), a descheduled thread holds every barrier and the demo model's 25 ms pass
took 0.3 to 7 s under ten students. Queued on one thread, and on one core while others wait, each pass runs at its
own speed; a lone request (one user, a long prompt) still gets every core.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

ALL_CORES = torch.get_num_threads()
MODEL_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model-work")
_pending = 0
_counting = threading.Lock()


def _count_pending(change: int) -> int:
    """Add ``change`` to the number of submitted jobs not yet finished, and return the new number."""
    global _pending
    with _counting:
        _pending += change
        return _pending


def _run_with_fitting_threads(function, args, kwargs):
    """Run one job on one core when others are waiting behind it, else on every core."""
    torch.set_num_threads(1 if _count_pending(0) > 1 else ALL_CORES)
    try:
        return function(*args, **kwargs)
    finally:
        _count_pending(-1)


async def in_model_thread(function, *args, **kwargs):
    """``function(*args, **kwargs)`` run on the shared model thread, awaited without holding the event loop."""
    _count_pending(+1)
    return await asyncio.get_running_loop().run_in_executor(MODEL_THREAD, _run_with_fitting_threads, function,
                                                            args, kwargs)
