"""Python's automatic collections held off while a class's runs go through the model, in the server only.

With thirty pages open, a full collection walks every page's objects while it holds the interpreter: for a large
part of a second no pass moves and no page publishes, and it comes in the middle of a class's runs, which allocate
the most (``benchmarks/classroom_load.py`` measures the class's p95). While a collector of runs works (``hold``),
Python does not collect by itself; once the model threads have been idle for a moment, or ``HELD_AT_MOST_SECONDS``
after the hold began whatever happens, one collection frees what the runs left and Python collects by itself again.
Objects without cycles are freed as always, by their reference counts.
"""

from __future__ import annotations

import asyncio
import gc
import time

from .model_work import models_idle

IDLE_CHECK_SECONDS = 0.5
HELD_AT_MOST_SECONDS = 20.0

_server = {"holds": False}  # set by the served page's start-up (``hold_collections_in_this_server``)
_held = {"since": None, "holders": 0}


def hold_collections_in_this_server() -> None:
    """Let class runs hold Python's automatic collections in this process (a notebook's interpreter is left as is)."""
    _server["holds"] = True


def hold() -> None:
    """Hold automatic collections until every hold has ended (``release_when_idle``); a hold kept longer than
    ``HELD_AT_MOST_SECONDS`` by runs that never stop collects once here."""
    if not _server["holds"]:
        return
    _held["holders"] += 1
    if _held["since"] is None and gc.isenabled():
        gc.disable()
        _held["since"] = time.monotonic()
    elif _held["since"] is not None and time.monotonic() - _held["since"] > HELD_AT_MOST_SECONDS:
        gc.collect()
        _held["since"] = time.monotonic()


async def release_when_idle() -> None:
    """End a hold. The last one, once the model threads are idle (checked every ``IDLE_CHECK_SECONDS``, first after
    one: the runs' pages publish meanwhile) or the hold has lasted ``HELD_AT_MOST_SECONDS``, collects once and lets
    Python collect by itself again."""
    if not _server["holds"]:
        return
    _held["holders"] -= 1
    while _held["holders"] == 0 and _held["since"] is not None:
        await asyncio.sleep(IDLE_CHECK_SECONDS)
        since = _held["since"]  # another release may have ended the hold meanwhile
        if since is not None and _held["holders"] == 0 and (models_idle()
                                                            or time.monotonic() - since > HELD_AT_MOST_SECONDS):
            _held["since"] = None
            gc.collect()
            gc.enable()
