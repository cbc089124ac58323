"""The page's controller without a browser: long jobs publish as they go and stop when a new run starts."""

from __future__ import annotations

import asyncio

import pytest
from conftest import run_coroutine

from viz_app import session as session_module
from viz_app.session import ExplorerSession, lens_chunks

LONG_PROMPT = " ".join(["word"] * 39)  # with BOS: 40 tokens, two lens chunks


@pytest.fixture
def controller(tiny_gpt2_dir):
    """A controller for the tiny GPT-2, loaded and with a run of LONG_PROMPT."""
    controller = ExplorerSession([str(tiny_gpt2_dir)])
    controller.state.prompt = LONG_PROMPT
    controller.outcomes.append(session_module.shared_model(str(tiny_gpt2_dir)))
    controller.loaded = controller.outcomes[0].loaded
    run_coroutine(controller.run_prompt())
    return controller


def test_lens_chunks_read_the_last_positions_first_and_every_position_once():
    for seq_len in (1, 16, 17, 40, 512):
        chunks = lens_chunks(seq_len)
        assert chunks[0][-1] == seq_len - 1
        assert sorted(p for chunk in chunks for p in chunk) == list(range(seq_len))


def test_the_lens_is_published_chunk_by_chunk_until_every_position_is_read(controller):
    published = []
    controller.state.param.watch(lambda event: published.append(event.new), "lens")
    run_coroutine(controller.read_lens())
    assert [len(lens.positions) for lens in published] == [16, 40]
    assert published[-1].positions.tolist() == list(range(40))


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
