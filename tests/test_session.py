"""The page's controller without a browser: long jobs publish as they go and stop when a new run starts."""

from __future__ import annotations

import asyncio

import pytest
from conftest import run_coroutine
from viz_app import session as session_module
import numpy as np

from viz_app.session import LENS_CHUNK_POSITIONS, LENS_MARGIN_POSITIONS, ExplorerSession, last_unread, unread_on_screen

LONG_PROMPT = " ".join(["word"] * 39)  # with BOS: 40 tokens, three lens chunks


@pytest.fixture
def controller(tiny_gpt2_dir):
    """A controller for the tiny GPT-2, loaded and with a run of LONG_PROMPT."""
    controller = ExplorerSession([str(tiny_gpt2_dir)])
    controller.state.prompt = LONG_PROMPT
    controller.outcomes.append(session_module.shared_model(str(tiny_gpt2_dir)))
    controller.loaded = controller.outcomes[0].loaded
    run_coroutine(controller.run_prompt())
    return controller


def test_the_lens_reads_the_positions_on_screen_then_the_last_unread_ones():
    unread = np.ones(40, dtype=bool)
    assert unread_on_screen(unread, None).tolist() == list(range(24, 40))
    assert unread_on_screen(unread, (10, 15)).tolist() == list(range(10 - LENS_MARGIN_POSITIONS,
                                                                    15 + LENS_MARGIN_POSITIONS + 1))
    zoomed_out = unread_on_screen(unread, (0, 39))  # read a chunk at a time, from the window's right end
    assert zoomed_out.tolist() == list(range(40 - LENS_CHUNK_POSITIONS, 40))
    assert unread_on_screen(unread, (0, 3)).tolist() == list(range(0, 3 + LENS_MARGIN_POSITIONS + 1))
    unread[24:] = False
    assert unread_on_screen(unread, None).size == 0
    assert unread_on_screen(unread, (50, 60)).size == 0  # dragged past the last token
    assert last_unread(unread).tolist() == list(range(24 - LENS_CHUNK_POSITIONS, 24))
    assert last_unread(np.ones(512, dtype=bool)).tolist() == list(range(512 - LENS_CHUNK_POSITIONS, 512))


def published_lenses(controller) -> list[list[int]]:
    """The positions of every lens the controller publishes from now on, in order."""
    published = []
    controller.state.param.watch(lambda event: event.new is not None and published.append(
        event.new.positions.tolist()), "lens")
    return published


def test_the_lens_is_published_chunk_by_chunk_until_every_position_is_read(controller):
    published = published_lenses(controller)
    run_coroutine(controller.read_lens())
    assert [len(positions) for positions in published] == [16, 32, 40]
    assert published[-1] == list(range(40))


def test_the_lens_reads_where_the_grid_was_dragged_first(controller):
    published = published_lenses(controller)
    controller.state.lens_window = (0, 4)
    run_coroutine(controller.read_lens())
    assert published[0] == list(range(0, 4 + LENS_MARGIN_POSITIONS + 1))
    assert published[-1] == list(range(40))


def test_the_lens_reads_off_screen_positions_only_while_no_run_waits_but_a_drag_at_once(controller, monkeypatch):
    """Another session's work keeps the model threads busy: the lens reads what the grid shows, and waits with
    the rest; a drag is read at once; the rest follows once the threads are idle."""
    published = published_lenses(controller)
    idle = False
    monkeypatch.setattr(session_module, "models_idle", lambda: idle)

    async def busy_models_then_a_drag_then_idle():
        nonlocal idle
        lens = asyncio.create_task(controller.read_lens())
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
    assert waited == [list(range(24, 40))]
    assert dragged[1] == list(range(0, 2 + LENS_MARGIN_POSITIONS + 1)) + list(range(24, 40))
    assert len(dragged) == 2
    assert published[-1] == list(range(40))


def test_a_new_run_stops_the_sweep_and_the_lens_of_the_last(controller, monkeypatch):
    passes = []
    scaled_logprob = session_module.scaled_logprob

    def counted_pass(*args, **kwargs):
        passes.append(args[3])
        return scaled_logprob(*args, **kwargs)

    monkeypatch.setattr(session_module, "scaled_logprob", counted_pass)

    async def new_run_during_the_sweep_and_the_lens():
        sweep, lens = asyncio.create_task(controller.sweep()), asyncio.create_task(controller.read_lens())
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
    monkeypatch.setattr(session_module, "models_idle", lambda: False)

    async def close_the_page_while_the_lens_waits():
        lens = asyncio.create_task(controller.read_lens())
        while not published:
            await asyncio.sleep(0.01)
        controller.stop_jobs()
        await asyncio.wait_for(lens, timeout=5)

    run_coroutine(close_the_page_while_the_lens_waits())
    assert len(published) == 1
