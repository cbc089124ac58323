"""The example notebook runs top to bottom in a headless kernel and every view shows data when its cell ends; the
notebook calls keep a controller (a view's later requests, the inline page's Run); every figure can be saved."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import nbformat
import panel as pn
import pytest
from bokeh.document import Document
from bokeh.models import ColumnDataSource, Plot, SaveTool
from conftest import run_coroutine
from nbclient import NotebookClient

from layouts.diagram_parts import diagram_parts
from layouts.state import BranchAsk
from model_backend import capture_run
from model_backend.branches import BranchStart, continue_from, parting_step
from model_backend.generation import WriteSettings, generate_tokens
from model_backend.tokens import encode_prompt
from viz_app.notebook import (attention_view, attribution_view, diagram_view, explorer, generation_view,
                              intervention_view, logit_lens_view, norms_view, patching_view, similarity_view)

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "explore.ipynb"
CELL_SECONDS = 300
PANEL_MIME = "application/vnd.holoviews_exec.v0+json"
# Each view's call in the notebook, and a figure its output holds once the view has data to draw.
FIGURE_BY_CALL = {
    "norms_view(": "norms_heatmap",
    "similarity_view(": "laminar_profile",
    "attention_view(": "attention_pattern",
    "logit_lens_view(": "logit_lens",
    "attribution_view(": "logit_attribution",
    "diagram_view(": "block_diagram",
    "intervention_view(": "intervention",
    "generation_view(": "commitment_strip",
    "explorer(": "Block diagram",
}


@pytest.fixture(scope="module")
def executed_notebook():
    """The example notebook after a headless run in its own folder, offline."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(notebook, kernel_name="python3", timeout=CELL_SECONDS,
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute(env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return notebook


def cell_calling(notebook, call: str):
    (cell,) = [cell for cell in notebook.cells if cell.cell_type == "code" and cell.source.startswith(call)]
    return cell


def panel_html(cell) -> str:
    """The HTML of a cell's Panel output (a display or the cell's value), empty when it showed none."""
    return "".join(output.data["text/html"] for output in cell.outputs
                   if output.output_type in ("display_data", "execute_result") and PANEL_MIME in output.data)


def test_the_committed_notebook_has_no_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not cell.outputs and cell.execution_count is None for cell in notebook.cells if cell.cell_type == "code")


def test_the_notebook_runs_offline_without_errors(executed_notebook):
    errors = [output for cell in executed_notebook.cells for output in cell.get("outputs", [])
              if output.output_type == "error"]
    assert not errors


@pytest.mark.parametrize("call", FIGURE_BY_CALL)
def test_each_view_cell_shows_its_figures(executed_notebook, call):
    html = panel_html(cell_calling(executed_notebook, call))
    assert FIGURE_BY_CALL[call] in html
    if call != "explorer(":
        assert " tokens" in html and "Run a prompt" not in html


def test_every_figure_of_every_view_has_the_save_tool(gpt2):
    """The README's promise: any figure saves as PNG from its toolbar (every diagram card pinned)."""
    run = capture_run(gpt2, "The capital of France is", bos=True)
    every_part = [part.id for part in diagram_parts(gpt2.family, run.n_layers, 0)]
    views = [norms_view(run), similarity_view(run), attention_view(run), diagram_view(gpt2, run, pinned=every_part),
             logit_lens_view(gpt2, run, target=" Paris"), attribution_view(gpt2, run),
             intervention_view(gpt2, run, target=" Paris"),
             patching_view(gpt2, run, "The capital of Italy is", " Paris", " Rome")]
    figures = [figure for view in views for figure in pn.panel(view).get_root(Document()).select({"type": Plot})]
    assert len(figures) > len(views)
    for figure in figures:
        assert figure.toolbar_location is not None, figure.title.text
        assert any(isinstance(tool, SaveTool) for tool in figure.toolbar.tools), figure.title.text


def test_the_patching_view_shows_every_cell_and_answers_a_new_corrupted_prompt(gpt2):
    """Filled when the call returns, from a prompt; a new corrupted prompt is patched after the call, as on the page."""
    async def patch_and_change() -> None:
        view = patching_view(gpt2, "The capital of France is", "The capital of Italy is", bos=True)
        root = pn.panel(view).get_root(Document())
        cells = next(s for s in root.select({"type": ColumnDataSource}) if s.name == "patching_layer_output_cells")
        assert len(cells.data["x"]) == gpt2.n_layers * view.state.run.seq_len
        assert view.state.patching.complete and view.state.patching.pair.clean.token_ids[0] == 50256
        view.state.corrupted_prompt = "The capital of Spain is"
        for _ in range(600):
            if view.state.patching is not None and view.state.patching.complete:
                break
            await asyncio.sleep(0.05)
        assert view.state.patching.pair.corrupted.prompt == "The capital of Spain is"

    run_coroutine(patch_and_change())


def test_the_generation_view_shows_the_backend_s_branches_and_continues_one_after_the_call(gpt2):
    prompt = "The capital of France is"
    view = generation_view(gpt2, prompt, 6, temperature=1.5, branches=3)
    state, prompt_ids = view.state, encode_prompt(gpt2, prompt, bos=True)
    expected = [generate_tokens(gpt2, prompt_ids, WriteSettings(max_new_tokens=6, temperature=1.5, seed=seed))
                for seed in range(3)]
    assert [text.token_ids for text in state.branch_texts] == [each.generated_ids.tolist() for each in expected]
    assert state.branch_parting == parting_step(expected) is not None
    assert state.run.seq_len == len(prompt_ids) + 6 and state.run.generated_from == len(prompt_ids)
    root = pn.panel(view).get_root(Document())
    cells = next(s for s in root.select({"type": ColumnDataSource}) if s.name == "commitment_cells")
    assert len(cells.data["x"]) == 6 and "…" not in cells.data["block"]
    step = state.branch_parting
    alternative = next(int(token) for token in expected[0].steps[step].top_ids
                       if token != expected[0].generated_ids[step])
    branch = continue_from(gpt2, BranchStart(expected[0], step, alternative), expected[0].settings)

    async def continue_the_first() -> None:
        state.branch_ask = BranchAsk(step=step, token_id=alternative)
        for _ in range(600):
            if len(state.branch_texts) == 4 and state.writing.done:
                break
            await asyncio.sleep(0.05)
        assert state.branch_texts[3].token_ids == branch.generated_ids.tolist() == state.writing.token_ids
        assert state.run.token_ids[len(prompt_ids):].tolist() == branch.generated_ids.tolist()

    run_coroutine(continue_the_first())


def test_a_view_refuses_a_block_the_model_lacks(gpt2):
    run = capture_run(gpt2, "One two", bos=True)
    with pytest.raises(ValueError, match="outside"):
        attention_view(run, layer=run.n_layers)


def prompt_box(page) -> pn.widgets.TextInput:
    return next(box for box in page.select(pn.widgets.TextInput) if box.placeholder.startswith("Type a prompt"))


def status_line(page) -> str:
    return next(pane.object for pane in page.select(pn.pane.HTML) if "status-line" in str(pane.object))


async def until_status_says(page, text: str) -> None:
    for _ in range(600):
        if text in status_line(page):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {status_line(page)!r}")


def test_a_view_asks_its_controller_for_what_it_was_not_given(gpt2):
    """Another block in the attention view, another target in the lens view: computed after the call, as on the
    page."""
    run = capture_run(gpt2, "The capital of France is", bos=True)

    async def change_block_and_target() -> None:
        attention, lens = attention_view(run, layer=0), logit_lens_view(gpt2, run, target=" Paris")
        attention.state.layer = run.n_layers - 1
        lens.state.target = " Rome"
        for _ in range(600):
            if attention.state.pattern_layer == run.n_layers - 1 and lens.state.lens is not None:
                break
            await asyncio.sleep(0.05)
        assert attention.state.pattern_layer == run.n_layers - 1
        assert lens.state.lens.target_id == gpt2.tokenizer.encode(" Rome")[0]

    run_coroutine(change_block_and_target())


def test_the_inline_page_runs_the_prompt_then_answers_run(gpt2):
    """As in Jupyter, an event loop is running: the first run starts after the call, Run starts another."""
    async def run_twice() -> None:
        page = explorer(gpt2)
        await until_status_says(page, f" {capture_run(gpt2, prompt_box(page).value, bos=True).seq_len} tokens ")
        prompt_box(page).value = "One two three"
        run_button = next(button for button in page.select(pn.widgets.Button) if button.label == "Run")
        run_button.param.trigger("value")
        await until_status_says(page, f" {capture_run(gpt2, 'One two three', bos=True).seq_len} tokens ")

    run_coroutine(run_twice())
