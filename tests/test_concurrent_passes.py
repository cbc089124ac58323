"""Passes of several threads through one model at once each keep only their own values, exactly as when alone.

A server runs two students' passes side by side on one shared model. Each test holds both passes inside the
model at the same moment (a barrier in a module both pass through), so a lock that kept them apart would fail
the test by timing out, and a hook that read the other thread's pass would show as a wrong value.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from conftest import PROMPT, run_coroutine

from model_backend import capture_run
from model_backend.interventions import scaled_logprob
from viz_app.model_work import ALL_CORES, in_model_thread, on_one_core, stop_giving_way

OTHER_PROMPT = "A rather longer prompt, so that the two passes differ in length as well as in tokens"
MEET_SECONDS = 30


def meeting_in(module, parties: int = 2):
    """A hook on ``module`` that holds each pass until ``parties`` passes are inside it together (it raises
    ``BrokenBarrierError`` after MEET_SECONDS if they never meet); returns its handle."""
    barrier = threading.Barrier(parties, timeout=MEET_SECONDS)

    def wait_for_the_others(*_) -> None:
        barrier.wait()
    return module.register_forward_hook(wait_for_the_others)


def side_by_side(*jobs):
    """Run each job in its own thread at once and return their results in order."""
    with ThreadPoolExecutor(len(jobs)) as pool:
        return [future.result() for future in [pool.submit(job) for job in jobs]]


def assert_same_run(run, alone) -> None:
    assert run.tokens == alone.tokens
    assert set(run.values) == set(alone.values)
    for name, value in alone.values.items():
        np.testing.assert_array_equal(run[name], value, err_msg=name)
    np.testing.assert_array_equal(run.attention_column_sums, alone.attention_column_sums)
    np.testing.assert_array_equal(run.value_norms, alone.value_norms)
    np.testing.assert_array_equal(run.logits, alone.logits)


def test_two_captures_inside_one_model_at_once_each_keep_exactly_their_own_values(loaded):
    alone = [capture_run(loaded, prompt, bos=False) for prompt in (PROMPT, OTHER_PROMPT)]
    handle = meeting_in(loaded.module("mlp", 0))
    try:
        together = side_by_side(lambda: capture_run(loaded, PROMPT), lambda: capture_run(loaded, OTHER_PROMPT))
    finally:
        handle.remove()
    for run, solo in zip(together, alone):
        assert_same_run(run, solo)


def test_a_scaled_block_changes_only_its_own_threads_pass(loaded):
    run = capture_run(loaded, PROMPT)
    target = int(run.token_ids[-1])
    scaled_alone = scaled_logprob(loaded, run, target, 0, alpha=0.0)
    handle = meeting_in(loaded.module("mlp", loaded.n_layers - 1))
    try:
        scaled, captured = side_by_side(lambda: scaled_logprob(loaded, run, target, 0, alpha=0.0),
                                        lambda: capture_run(loaded, PROMPT))
    finally:
        handle.remove()
    assert scaled == scaled_alone
    assert_same_run(captured, run)


@pytest.mark.skipif(ALL_CORES < 2, reason="one core: one model thread")
def test_model_jobs_run_two_at_a_time_on_one_core_each_and_alone_on_every_core():
    meeting = threading.Barrier(2, timeout=MEET_SECONDS)

    def threads_when_both_started() -> int:
        meeting.wait()
        return torch.get_num_threads()

    async def two_jobs_then_one():
        together = await asyncio.gather(in_model_thread(threads_when_both_started),
                                        in_model_thread(threads_when_both_started))
        return together, await in_model_thread(torch.get_num_threads)

    together, alone = run_coroutine(two_jobs_then_one())
    assert together == [1, 1]
    assert alone == ALL_CORES


@pytest.mark.skipif(ALL_CORES < 2, reason="one core: one model thread")
def test_a_job_that_gives_way_runs_on_one_core_even_alone():
    async def giving_way_then_not():
        return (await in_model_thread(torch.get_num_threads, gives_way=True),
                await in_model_thread(torch.get_num_threads))

    assert run_coroutine(giving_way_then_not()) == (1, ALL_CORES)


@pytest.mark.skipif(ALL_CORES < 2, reason="one core: one model thread")
def test_a_job_that_gave_way_takes_every_core_once_waited_for_and_counts_against_the_next():
    waited_for, meeting = threading.Event(), threading.Barrier(2, timeout=MEET_SECONDS)

    def gave_way_then_waited_for() -> tuple[int, int]:
        giving_way = torch.get_num_threads()
        stop_giving_way()
        waited_for.set()
        waited = torch.get_num_threads()
        meeting.wait()
        return giving_way, waited

    def threads_beside_it() -> int:
        meeting.wait()
        return torch.get_num_threads()

    async def waited_for_then_another():
        first = asyncio.ensure_future(in_model_thread(gave_way_then_waited_for, gives_way=True))
        await asyncio.to_thread(waited_for.wait, MEET_SECONDS)
        beside = await in_model_thread(threads_beside_it)
        return await first, beside

    assert run_coroutine(waited_for_then_another()) == ((1, ALL_CORES), 1)


@pytest.mark.skipif(ALL_CORES < 2, reason="one core: one model thread")
def test_only_the_wide_model_thread_computes_on_several_cores_and_work_that_gives_way_keeps_no_job_from_it():
    started, release = threading.Event(), threading.Event()

    def giving_way_until_released() -> str:
        started.set()
        release.wait(MEET_SECONDS)
        return threading.current_thread().name

    def thread_and_cores() -> tuple[str, int]:
        return threading.current_thread().name, torch.get_num_threads()

    async def a_job_while_work_gives_way_then_two_jobs():
        giving_way = asyncio.ensure_future(in_model_thread(giving_way_until_released, gives_way=True))
        await asyncio.to_thread(started.wait, MEET_SECONDS)
        waiting = asyncio.ensure_future(in_model_thread(thread_and_cores))  # queued behind it, in the same thread
        await asyncio.sleep(0.05)
        release.set()
        first = await giving_way, await waiting
        meeting = threading.Barrier(2, timeout=MEET_SECONDS)

        def met() -> tuple[str, int]:
            meeting.wait()
            return thread_and_cores()

        return first, await asyncio.gather(in_model_thread(met), in_model_thread(met))

    (gave_way_in, (queued_in, queued_cores)), side_by_side = run_coroutine(a_job_while_work_gives_way_then_two_jobs())
    assert queued_in == gave_way_in and queued_cores == ALL_CORES
    assert [cores for _, cores in side_by_side] == [1, 1]
    assert len({name for name, _ in side_by_side}) == 2


def test_torch_work_outside_the_model_threads_runs_on_one_core():
    with ThreadPoolExecutor(max_workers=1) as elsewhere:
        assert elsewhere.submit(on_one_core, torch.get_num_threads).result() == 1
