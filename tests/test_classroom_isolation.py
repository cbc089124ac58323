"""Students on one server run their own prompts at once; each page ends showing its own run and pinned card,
never another's. Five chromium pages, then ten script-driven Bokeh client sessions, which also check that every
patch applied and that no stylesheet comes from outside the server. The timed, 30-session version is
benchmarks/classroom_load.py; both drive the same code."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from conftest import run_coroutine

from page_driving.classroom import run_classroom, session_plans
from page_driving.script_classroom import script_classroom

N_SESSIONS = 5


def test_concurrent_sessions_each_show_only_their_own_run(served_app, tiny_gpt2_dir):
    plans = session_plans(tiny_gpt2_dir, N_SESSIONS, shortest=20, longest=60)  # the tiny model reads 64 positions
    assert len({plan.prompt for plan in plans}) == len({plan.pinned for plan in plans}) == N_SESSIONS
    outcomes = run_coroutine(run_classroom(served_app.url, plans))
    assert [outcome.problems for outcome in outcomes] == [[] for _ in plans]


def test_script_sessions_each_show_only_their_own_run(served_app, tiny_gpt2_dir):
    plans = session_plans(tiny_gpt2_dir, 2 * N_SESSIONS, shortest=20, longest=60)
    with ThreadPoolExecutor(1) as thread:  # the clients run their own event loops; the browser tests' loop is running
        outcomes = thread.submit(script_classroom, served_app.url, plans).result()
    assert [outcome.problems for outcome in outcomes] == [[] for _ in plans]
    assert all(outcome.seconds is not None for outcome in outcomes)
