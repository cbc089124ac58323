"""The Norms tab's comparison of two revisions of one model (a fake HF cache, offline): the second revision runs the
same prompt, both heatmaps are drawn on one colour scale under their own names, and a refused run says why."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from conftest import run_coroutine
from hf_revisions import REPO_ID, write_two_revisions
from huggingface_hub import constants as hub_constants

from layouts.norms_comparison import NormsComparisonView
from model_backend.norms import residual_norms
from viz_app.session import ExplorerSession
from viz_app.url_state import url_choices

STEP = f"{REPO_ID}@step1000"


@pytest.fixture
def revisions_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(write_two_revisions(tmp_path / "hub")))


def started_comparing(compare: str) -> ExplorerSession:
    """A session serving both revisions, started with ``compare`` chosen, once every job it launched has ended
    (made inside the coroutine: a task its watchers start then belongs to that coroutine's loop, not to the one a
    browser test leaves in the main thread)."""
    async def start_and_finish() -> ExplorerSession:
        session = ExplorerSession([REPO_ID, STEP])
        session.state.compare = compare
        await session.start()
        while running := session.launcher.__self__.running:
            await asyncio.gather(*running)
        return session

    return run_coroutine(start_and_finish())


def test_two_revisions_are_drawn_on_one_colour_scale_under_their_names(revisions_cache):
    state = started_comparing(STEP).state
    assert state.model == REPO_ID and state.compare_offered == [STEP]
    assert state.comparison.run.model_name == STEP and state.comparison.run.tokens == state.run.tokens
    assert not np.allclose(residual_norms(state.comparison.run), residual_norms(state.run))
    view = NormsComparisonView(state)
    titles = [fig.title.text for fig, _, _ in view.figures]
    assert titles[0].startswith(f"{REPO_ID} · ") and titles[1].startswith(f"{STEP} · ")
    both = np.concatenate([residual_norms(state.run)[:, 1:], residual_norms(state.comparison.run)[:, 1:]], axis=1)
    assert (view.mapper.low, view.mapper.high) == pytest.approx((both.min(), both.max()), rel=1e-6)
    marked = [marks.data["position"] for _, _, marks in view.figures]
    assert marked == [[s.position for s in sinks.sinks] for sinks in (state.sinks, state.comparison.sinks)]


def test_a_failed_comparison_run_says_why_and_draws_nothing(revisions_cache, monkeypatch):
    def out_of_memory(*_args, **_kwargs):
        raise MemoryError

    monkeypatch.setattr("viz_app.comparison.page_run", out_of_memory)  # the main run still runs
    state = started_comparing(STEP).state
    assert state.comparison is None and state.run is not None
    assert state.comparison_note == f"{STEP} could not run this prompt for the comparison: Out of memory: try a " \
                                    "shorter prompt."


def test_a_compared_model_not_loaded_here_is_named_in_the_note(revisions_cache):
    state = started_comparing("someone/else@step9").state
    assert state.comparison is None and state.comparison_note == ("No comparison: someone/else@step9 is not among "
                                                                  "the models loaded here.")


def test_the_compared_model_is_read_from_the_link_and_a_long_one_refused():
    assert url_choices({"compare": [STEP.encode()]}) == ({"compare": STEP}, [])
    choices, notes = url_choices({"compare": [b"x" * 201]})
    assert choices == {} and notes == ["the link's compared model name is too long: its default is used"]
