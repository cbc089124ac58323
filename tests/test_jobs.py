"""A session's job: cancelled by a newer job of its kind or a closed page, and publishing only while its run shows."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from conftest import run_coroutine

from layouts.state import ExplorerState
from viz_app.jobs import SessionJobs
from viz_app.publishing import Publisher


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


def jobs_on(run=FIRST_RUN, document=None) -> SessionJobs:
    state = ExplorerState()
    state.run = run
    return SessionJobs(Publisher(state, document))


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
