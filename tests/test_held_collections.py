"""Python's automatic collections held off while a class's runs compute (``viz_app/held_collections.py``)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from conftest import run_coroutine

from viz_app import held_collections


@pytest.fixture
def in_a_server(monkeypatch):
    monkeypatch.setitem(held_collections._server, "holds", True)
    monkeypatch.setattr(held_collections, "IDLE_CHECK_SECONDS", 0.01)
    yield
    gc.enable()


def test_a_hold_stops_automatic_collections_until_the_model_threads_are_idle(in_a_server, monkeypatch):
    idle, collected = False, []
    monkeypatch.setattr(held_collections, "models_idle", lambda: idle)
    monkeypatch.setattr(held_collections.gc, "collect", lambda: collected.append(True))

    async def hold_then_release():
        nonlocal idle
        held_collections.hold()
        held = not gc.isenabled()
        release = asyncio.ensure_future(held_collections.release_when_idle())
        await asyncio.sleep(0.05)
        still_held = not gc.isenabled() and not collected  # the model threads are busy
        idle = True
        await release
        return held, still_held

    assert run_coroutine(hold_then_release()) == (True, True)
    assert gc.isenabled() and collected == [True]


def test_collections_resume_after_the_last_of_several_holds(in_a_server, monkeypatch):
    monkeypatch.setattr(held_collections, "models_idle", lambda: True)

    async def two_holds():
        held_collections.hold()
        held_collections.hold()
        await held_collections.release_when_idle()
        after_first = gc.isenabled()
        await held_collections.release_when_idle()
        return after_first

    assert run_coroutine(two_holds()) is False
    assert gc.isenabled()


def test_a_hold_kept_too_long_collects_while_runs_go_on(in_a_server, monkeypatch):
    collected = []
    monkeypatch.setattr(held_collections.gc, "collect", lambda: collected.append(True))
    monkeypatch.setattr(held_collections, "HELD_AT_MOST_SECONDS", 0.0)
    held_collections.hold()
    held_collections.hold()  # a later class's runs, while the first hold lasts
    assert collected == [True] and not gc.isenabled()
    monkeypatch.setattr(held_collections, "models_idle", lambda: True)
    run_coroutine(held_collections.release_when_idle())
    run_coroutine(held_collections.release_when_idle())
    assert gc.isenabled()


def test_two_releases_waiting_at_once_end_the_hold_once(in_a_server, monkeypatch):
    idle_answers, collected = [], []  # the model threads are idle once, then busy again (another class comes)
    monkeypatch.setattr(held_collections, "IDLE_CHECK_SECONDS", 0.05)
    monkeypatch.setattr(held_collections, "models_idle", lambda: idle_answers.pop() if idle_answers else False)
    monkeypatch.setattr(held_collections.gc, "collect", lambda: collected.append(True))

    async def a_class_then_another_while_the_first_release_waits():
        held_collections.hold()
        first = asyncio.ensure_future(held_collections.release_when_idle())
        await asyncio.sleep(0.03)  # between two of the first release's checks
        held_collections.hold()
        second = asyncio.ensure_future(held_collections.release_when_idle())
        await asyncio.sleep(0.05)
        idle_answers.append(True)
        await asyncio.wait_for(asyncio.gather(first, second), timeout=5)

    run_coroutine(a_class_then_another_while_the_first_release_waits())
    assert gc.isenabled() and collected == [True]


def test_outside_a_server_nothing_is_held():
    held_collections.hold()
    assert gc.isenabled()
    run_coroutine(held_collections.release_when_idle())
    assert gc.isenabled()
