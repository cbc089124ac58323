"""Runs asked while the model threads are busy go through the model as one batch; a lone run goes at once."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import run_coroutine

from model_backend import capture_run
from viz_app import run_batches
from viz_app.work import process_model_work
from viz_app.model_work import BESIDE_THREAD, MODEL_THREAD_COUNT, WIDE_THREAD, in_model_thread

async def analysed_together(loaded, prompt: str, bos: bool):
    """The prompt's analysis through the process's batcher of ``loaded`` on the running loop, as a page asks it."""
    return await process_model_work().batcher(loaded).analysed_together(prompt, bos)


PROMPTS = ("The capital of France is Paris, and the capital of Italy is", "Short one", "A prompt of middle length")


def recording_batches(monkeypatch) -> list[int]:
    """The row count of every capture_batch call from now on."""
    rows, real = [], run_batches.capture_batch
    monkeypatch.setattr(run_batches, "capture_batch",
                        lambda loaded, token_lists, **kwargs: rows.append(len(token_lists))
                        or real(loaded, token_lists, **kwargs))
    return rows


def test_runs_asked_while_the_threads_are_busy_share_one_pass_and_each_gets_its_own(gpt2, monkeypatch):
    rows = recording_batches(monkeypatch)
    release = threading.Event()

    async def class_presses_run():
        busy = [asyncio.ensure_future(in_model_thread(release.wait)) for _ in range(MODEL_THREAD_COUNT)]
        await asyncio.sleep(0.1)  # every model thread is taken
        asked = [asyncio.ensure_future(analysed_together(gpt2, prompt, True)) for prompt in PROMPTS]
        await asyncio.sleep(0.1)
        release.set()
        await asyncio.gather(*busy)
        return await asyncio.gather(*asked)

    analyses = run_coroutine(class_presses_run())
    assert rows == [len(PROMPTS)]
    for prompt, analysis in zip(PROMPTS, analyses):
        alone = capture_run(gpt2, prompt, bos=True)
        assert analysis.run.prompt == prompt and analysis.run.tokens == alone.tokens
        for name, value in alone.values.items():
            np.testing.assert_allclose(analysis.run[name], value, rtol=1e-5, atol=1e-5 * np.abs(value).max())


def test_a_class_asking_for_the_same_run_shares_one_row_and_a_run_still_shown_costs_no_pass(gpt2, monkeypatch):
    """Three pages ask for one prompt and a fourth for another while the threads are busy: one pass of two rows,
    the three get one analysis, read-only. A page asking for it while one of them still shows it gets it with no
    pass; once none shows it, it is computed again, and so is a page's own asked again."""
    rows = recording_batches(monkeypatch)
    release = threading.Event()

    async def class_presses_run():
        busy = [asyncio.ensure_future(in_model_thread(release.wait)) for _ in range(MODEL_THREAD_COUNT)]
        await asyncio.sleep(0.1)
        asked = [asyncio.ensure_future(analysed_together(gpt2, prompt, True))
                 for prompt in (PROMPTS[0], PROMPTS[1], PROMPTS[0], PROMPTS[0])]
        await asyncio.sleep(0.1)
        release.set()
        await asyncio.gather(*busy)
        (first, other, second, third) = await asyncio.gather(*asked)
        late = await analysed_together(gpt2, PROMPTS[0], True)  # a student a moment late: the class still shows it
        assert rows == [2] and first is second is third is late and other is not first
        assert first.run.prompt == PROMPTS[0] and other.run.prompt == PROMPTS[1]
        with pytest.raises(ValueError, match="read-only"):
            first.run["layers.0.layer_output"][0, 0] = 1.0  # nothing one page does can change what another sees
        alone = capture_run(gpt2, PROMPTS[0], bos=True)
        np.testing.assert_allclose(first.run["final_norm_output"], alone["final_norm_output"], rtol=1e-5, atol=1e-5)
        del first, second, third, late, asked  # the tasks hold their results too
        await asyncio.sleep(0)  # and so does the loop's call that woke this coroutine with them, until it returns
        gc.collect()  # no page shows it any more: the next ask computes it again, the other is still shared
        assert (await analysed_together(gpt2, PROMPTS[1], True)) is other
        await analysed_together(gpt2, PROMPTS[0], True)
        assert rows == [2, 1]
        again = await process_model_work().batcher(gpt2).analysed_together(PROMPTS[1], True, shown=other)
        assert again is not other and rows == [2, 1, 1]  # Run pressed again on a page: a new pass

    run_coroutine(class_presses_run())


def test_a_lone_run_goes_through_alone_and_a_refused_prompt_does_not_stop_the_others(gpt2, monkeypatch):
    rows = recording_batches(monkeypatch)
    analysis = run_coroutine(analysed_together(gpt2, PROMPTS[0], True))
    assert rows == [1] and analysis.run.prompt == PROMPTS[0]

    async def with_an_empty_prompt():
        return await asyncio.gather(analysed_together(gpt2, "", False),
                                    analysed_together(gpt2, PROMPTS[1], True), return_exceptions=True)

    refused, analysed = run_coroutine(with_an_empty_prompt())
    assert isinstance(refused, Exception) and analysed.run.prompt == PROMPTS[1]


def test_batches_keep_under_their_padded_size(monkeypatch):
    monkeypatch.setattr(run_batches, "PASS_COST_TOKENS", 1_000)  # as few passes as the limits allow
    monkeypatch.setattr(run_batches, "MAX_BATCH_TOKENS", 10)
    tokenized = [(name, [0] * length) for name, length in (("a", 5), ("b", 2), ("c", 3), ("d", 12))]
    assert batch_names(tokenized) == [["b", "c"], ["a"], ["d"]]
    monkeypatch.setattr(run_batches, "MAX_BATCH_PATTERN", 17)  # two rows of 3 tokens: 18 entries, too many
    assert batch_names(tokenized) == [["b"], ["c"], ["a"], ["d"]]


def test_runs_of_similar_length_share_a_batch_and_runs_far_apart_do_not():
    """Padding short runs to a long one costs more than a pass of their own; a few tokens' difference does not."""
    lengths = {"a": 101, "b": 10, "c": 100, "d": 12, "e": 11, "f": 102}
    assert batch_names([(name, [0] * length) for name, length in lengths.items()]) == [["b", "e", "d"],
                                                                                        ["c", "a", "f"]]
    assert batch_names([(name, [0] * length) for name, length in (("x", 31), ("y", 30), ("z", 32))]) == [
        ["y", "x", "z"]]


def batch_names(tokenized) -> list[list[str]]:
    return [[name for name, _ in batch] for batch in run_batches.batches(tokenized)]


def test_a_batch_done_is_handed_out_while_the_next_one_computes(gpt2, monkeypatch):
    """The short runs' pages publish while the long runs' batch still computes."""
    real, second_pass_ended = run_batches.capture_batch, []

    def slow_second_pass(loaded, token_lists, **kwargs):
        runs = real(loaded, token_lists, **kwargs)
        if len(token_lists[0]) > 20:
            time.sleep(0.5)
            second_pass_ended.append(time.monotonic())
        return runs

    monkeypatch.setattr(run_batches, "capture_batch", slow_second_pass)
    monkeypatch.setattr(run_batches, "PASS_COST_TOKENS", 8)  # the tiny model's prompts are short: two batches
    release = threading.Event()
    short, long = ["Short one", "Short two"], [" ".join(["word"] * 40), " ".join(["word"] * 41)]

    async def class_presses_run():
        busy = [asyncio.ensure_future(in_model_thread(release.wait)) for _ in range(MODEL_THREAD_COUNT)]
        await asyncio.sleep(0.1)
        asked = [asyncio.ensure_future(arrival_time(prompt)) for prompt in short + long]
        await asyncio.sleep(0.1)
        release.set()
        await asyncio.gather(*busy)
        return await asyncio.gather(*asked)

    async def arrival_time(prompt: str) -> float:
        await analysed_together(gpt2, prompt, True)
        return time.monotonic()

    arrivals = run_coroutine(class_presses_run())
    assert max(arrivals[:2]) < second_pass_ended[0] <= min(arrivals[2:])


def test_a_collector_left_on_a_loop_that_stopped_running_holds_up_no_run_on_another(gpt2):
    """After a browser test, pytest-playwright leaves an event loop marked running that nothing spins: a collector
    started there never ends, and once held every later run of the same model."""
    release = threading.Event()
    busy = [thread.submit(release.wait) for thread in (WIDE_THREAD, BESIDE_THREAD) if thread is not None]
    stopped = asyncio.new_event_loop()
    try:
        stranded = in_a_thread(lambda: stopped.create_task(analysed_together(gpt2, PROMPTS[1], True)))
        in_a_thread(lambda: stopped.run_until_complete(asyncio.sleep(0.05)))  # its collector waits for a model thread
    finally:
        release.set()  # the model threads are never left held, whatever happened
    for job in busy:
        job.result()
    time.sleep(1)  # the collector's job ends on a model thread, and its result waits for the stopped loop
    analysis = run_coroutine(asyncio.wait_for(analysed_together(gpt2, PROMPTS[0], True), 20))
    assert analysis.run.prompt == PROMPTS[0]
    assert in_a_thread(lambda: stopped.run_until_complete(stranded)).run.prompt == PROMPTS[1]
    stopped.close()


def in_a_thread(function):
    """``function()`` in a thread of its own: once a browser test has run, pytest-playwright keeps a loop running in
    the main thread, and no other loop may run there."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(function).result()


def test_a_run_asked_while_a_batch_computes_joins_the_batches_not_yet_run(gpt2, monkeypatch):
    rows, real, first_pass = [], run_batches.capture_batch, threading.Event()

    def recording(loaded, token_lists, **kwargs):
        rows.append(len(token_lists))
        first_pass.set()
        time.sleep(0.3 if len(rows) == 1 else 0)  # the late run is asked meanwhile
        return real(loaded, token_lists, **kwargs)

    monkeypatch.setattr(run_batches, "capture_batch", recording)
    monkeypatch.setattr(run_batches, "PASS_COST_TOKENS", 8)  # the tiny model's prompts are short: two batches
    release = threading.Event()
    prompts = ["Short one", "Short two", " ".join(["word"] * 40), " ".join(["word"] * 41)]

    async def a_late_student():
        busy = [asyncio.ensure_future(in_model_thread(release.wait)) for _ in range(MODEL_THREAD_COUNT)]
        await asyncio.sleep(0.1)
        asked = [asyncio.ensure_future(analysed_together(gpt2, prompt, True)) for prompt in prompts]
        await asyncio.sleep(0.1)
        release.set()
        await asyncio.gather(*busy)
        await asyncio.to_thread(first_pass.wait)
        late = await analysed_together(gpt2, " ".join(["word"] * 42), True)
        return late, await asyncio.gather(*asked)

    late, analyses = run_coroutine(a_late_student())
    assert rows == [2, 3]
    assert [a.run.prompt for a in analyses] == prompts and late.run.seq_len == 43
