"""A page's job (``viz_app/work.py``, ``viz_app/jobs.py``): cancelled by a newer job of its kind or a closed
page, and publishing only while its run shows; ``PageWork.run`` takes the turn, shows the busy line and reports."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from conftest import run_coroutine

from layouts.state import ExplorerState
from viz_app.publishing import Publisher
from viz_app.work import ModelWork, PageWork


FIRST_RUN, SECOND_RUN = (SimpleNamespace(n_layers=2, seq_len=3) for _ in range(2))


class HeldDocument:
    """A served document stand-in whose next-tick callbacks wait until ``tick`` runs them, as Bokeh's do."""

    session_context = object()

    def __init__(self):
        self.waiting = []

    def add_next_tick_callback(self, callback) -> None:
        self.waiting.append(callback)

    def tick(self) -> None:
        while self.waiting:
            self.waiting.pop(0)()


def jobs_on(run=FIRST_RUN, document=None) -> PageWork:
    state = ExplorerState()
    state.run = run
    return PageWork(ModelWork(), Publisher(state, document))


def test_a_current_job_publishes_its_result():
    jobs = jobs_on()
    jobs.start("lens", FIRST_RUN).publish(message="read")
    assert jobs.publisher.state.message == "read"


def test_a_newer_job_of_its_kind_cancels_the_one_before():
    jobs = jobs_on()
    first = jobs.start("lens", FIRST_RUN)
    second = jobs.start("lens", FIRST_RUN)
    first.publish(message="old")
    assert first.cancelled and not first.current and second.current
    assert jobs.publisher.state.message == ""


def test_a_closed_page_cancels_every_job():
    jobs = jobs_on()
    lens, sweep = jobs.start("lens", FIRST_RUN), jobs.start("sweep", FIRST_RUN)
    jobs.cancel()
    assert lens.cancelled and sweep.cancelled


def test_a_result_for_a_run_no_longer_shown_is_not_published():
    jobs = jobs_on()
    job = jobs.start("sweep", FIRST_RUN)
    jobs.publisher.state.run = SECOND_RUN
    job.publish(message="stale")
    assert jobs.publisher.state.message == ""


def test_a_job_is_checked_when_its_write_is_applied_not_when_asked():
    """A new run published between the ask and the document's tick drops the older job's result."""
    document = HeldDocument()
    jobs = jobs_on(document=document)
    job = jobs.start("lens", FIRST_RUN)
    jobs.publisher.update(run=SECOND_RUN)
    job.publish(message="stale")
    assert job.current
    document.tick()
    assert jobs.publisher.state.run is SECOND_RUN and jobs.publisher.state.message == ""


def test_a_job_that_makes_a_run_publishes_until_cancelled():
    jobs = jobs_on(run=None)
    making = jobs.start("run", None)
    making.publish(run=FIRST_RUN)
    jobs.start("run", None)
    making.publish(run=SECOND_RUN)
    assert jobs.publisher.state.run is FIRST_RUN


class TickingDocument:
    """A served document stand-in whose next-tick callbacks run on the event loop's next turn."""

    session_context = object()

    def add_next_tick_callback(self, callback) -> None:
        asyncio.get_running_loop().call_soon(callback)


def test_sent_waits_until_the_changes_are_applied_and_the_delay_after():
    """A tab's passes wait so: the browser draws the tab's first figures before they take the cores."""
    publisher = Publisher(ExplorerState(), TickingDocument())

    async def publish_then_wait_until_sent():
        publisher.update(message="drawn")
        started = time.perf_counter()
        await publisher.sent(delay=0.2)
        return publisher.state.message, time.perf_counter() - started

    message, waited = run_coroutine(publish_then_wait_until_sent())
    assert message == "drawn" and waited >= 0.2


def test_a_job_runs_on_a_model_thread_while_the_busy_line_says_so():
    jobs = jobs_on()
    seen = []
    done = run_coroutine(jobs.run("lens", "Reading…", lambda: seen.append(jobs.publisher.state.busy) or 7))
    assert done.ran and done.value == 7 and seen == ["Reading…"] and jobs.publisher.state.busy == ""
    assert done.job.run is FIRST_RUN  # the run shown when it started


def test_a_failing_job_is_reported_on_the_page_and_the_next_one_runs():
    jobs = jobs_on()

    def fails():
        raise MemoryError

    failed = run_coroutine(jobs.run("lens", "Reading…", fails))
    assert not failed.ran and isinstance(failed.error, MemoryError)
    assert jobs.publisher.state.message == "Out of memory: try a shorter prompt." and jobs.publisher.state.busy == ""
    assert run_coroutine(jobs.run("lens", "Reading…", lambda: 1)).value == 1


def test_a_job_waits_for_the_page_s_turn_and_is_skipped_if_superseded_meanwhile():
    jobs = jobs_on()
    ran = []

    async def two_jobs_of_one_kind():
        async def slow():
            await asyncio.sleep(0.1)
            return "first"
        first = asyncio.ensure_future(jobs.run("lens", "Reading…", slow))
        await asyncio.sleep(0.01)  # the first holds the page's turn
        second = asyncio.ensure_future(jobs.run("sweep", "Scaling…", lambda: ran.append("sweep") or "second"))
        await asyncio.sleep(0.01)  # it has started its job and waits for the turn
        jobs.cancel("sweep")  # superseded before its turn comes
        return await first, await second

    first, second = run_coroutine(two_jobs_of_one_kind())
    assert first.ran and first.value == "first"
    assert not second.ran and second.error is None and ran == []


def test_work_nobody_waits_for_takes_no_turn_and_reports_nothing():
    jobs = jobs_on()

    def fails():
        raise RuntimeError("read ahead failed")

    async def while_the_turn_is_held():
        async with jobs.turn:
            return await jobs.run("lens ahead", None, fails)

    done = run_coroutine(while_the_turn_is_held())
    assert isinstance(done.error, RuntimeError) and jobs.publisher.state.message == ""
