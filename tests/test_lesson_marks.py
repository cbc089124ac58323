"""The lessons' highlights without a browser: each step marks what its text talks about, at the index the backend
computes for the run (tiny random-init models with perturbed norm gains), and each view draws the mark as an
outlined, labelled overlay."""

from __future__ import annotations

import dataclasses

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document

from layouts.attribution_view import AttributionView
from layouts.diagram_view import DiagramView
from layouts.intervention_view import InterventionView
from layouts.lesson_marks import lesson_marks
from layouts.lesson_text import LessonInputs
from layouts.logit_lens_view import LogitLensView
from layouts.norms_view import NormsView
from layouts.patching_view import PatchingView
from layouts.similarity_view import SimilarityView
from layouts.state import ExplorerState
from model_backend import activation_patching, detect_sinks, direct_logit_attribution, logit_lens, scaling_sweep
from model_backend.patching import Patching, patch_block
from test_lessons import inputs_for


@pytest.fixture(scope="module")
def results(loaded, run):
    """The results every step's marks read, computed as the page does for the run's top prediction."""
    target_id = int(run.logits_at([-1])[0].argmax())
    lens = logit_lens(loaded, run, target_id=target_id)
    inputs = inputs_for(loaded, run, lens=lens, attribution=direct_logit_attribution(loaded, run, target_id),
                        sweep=scaling_sweep(loaded, run, target_id))
    return inputs, target_id


@pytest.fixture(scope="module")
def patched(loaded):
    """Lesson 7's inputs: the France prompt patched from the Italy one, " Paris" against " Rome"."""
    patching = activation_patching(loaded, "The capital of France is", "The capital of Italy is", answer=" Paris",
                                   wrong=" Rome")
    return inputs_for(loaded, patching.pair.clean, patching=patching)


def marked(step: int, inputs: LessonInputs, figure: str) -> list:
    return [mark["at"] for mark in lesson_marks(step, inputs)[figure]]


def test_step_1_marks_the_pinned_block(results):
    inputs, _ = results
    assert marked(1, inputs, "block_diagram") == [f"block.{inputs.layer}"]


def test_step_2_marks_the_sink_detect_sinks_finds(results, run):
    inputs, _ = results
    report = detect_sinks(run)
    expected = report.sinks[0].position if report.sinks else 0
    assert marked(2, inputs, "norms_heatmap") == marked(2, inputs, "norms_lines") == [expected]
    later = report.evidence[-1]  # a candidate after position 0, made a sink by its numbers
    assert later.position > 0
    sink = type(later)(later.position, later.token, 120.0, 0.81, run.n_layers, 0.2, ("norm", "attention"))
    forced = LessonInputs(**{**inputs.__dict__, "sinks": type(report)([*report.evidence[:-1], sink],
                                                                        report.n_layers, report.residual_norms)})
    assert marked(2, forced, "norms_heatmap") == [later.position]
    assert lesson_marks(2, forced)["norms_heatmap"][0]["label"] == "lesson: the sink"


def test_step_3_marks_position_0_and_the_token_followed(results, run):
    inputs, _ = results
    assert marked(3, inputs, "similarity_within_layer") == [0]
    assert marked(3, inputs, "similarity_across_layers") == [run.seq_len - 1]


def test_step_4_marks_the_first_block_where_the_lens_top_1_is_the_target_and_the_output_row(results, run):
    inputs, target_id = results
    lens, last = inputs.lens, run.seq_len - 1
    top_is_target = lens.top_ids[:, last, 0] == target_id
    first = int(np.argmax(top_is_target))
    assert top_is_target[first] and top_is_target[-1]  # the output row's top is the target: the model's prediction
    assert marked(4, inputs, "logit_lens") == [(first, last), (lens.n_rows - 1, None)]
    ranks = np.ones_like(lens.target_ranks)  # the answer on top from row 1, lost at row 2, back from row 3 on
    ranks[[0, 2], last] = 7
    early = LessonInputs(**{**inputs.__dict__, "lens": dataclasses.replace(lens, target_ranks=ranks)})
    assert marked(4, early, "logit_lens") == [(1, last), (lens.n_rows - 1, None)]


def test_step_5_marks_the_largest_attribution_bars(results):
    inputs, _ = results
    labels, terms = inputs.attribution.bars()
    assert marked(5, inputs, "logit_attribution")[0] == labels[int(np.argmax(terms))]
    assert marked(5, inputs, "logit_attribution") == [labels[i] for i in np.argsort(-terms)[:3]]


def test_step_6_marks_the_block_that_moves_the_answer_most_and_the_last_block(results, run):
    inputs, _ = results
    changes = inputs.sweep.scaled_logprobs - inputs.sweep.clean_logprob
    assert marked(6, inputs, "intervention") == [int(np.argmax(np.abs(changes[:-1]))), run.n_layers - 1]


def test_step_7_marks_the_swapped_tokens_and_the_last_tokens_columns_once_every_block_is_patched(loaded, patched):
    patching = patched.patching
    clean, corrupted = patching.pair.clean.tokens, patching.pair.corrupted.tokens
    swapped = [p for p, (a, b) in enumerate(zip(clean, corrupted)) if a != b]
    assert [clean[p] for p in swapped] == [" France"]
    assert marked(7, patched, "patching_layer_output") == [swapped[0], patching.pair.clean.seq_len - 1]
    assert [m["label"] for m in lesson_marks(7, patched)["patching_layer_output"]] == [
        "lesson: swapped token", "lesson: last token"]
    streaming = Patching.empty(patching.pair).with_block(patch_block(loaded, patching.pair, 0))
    assert lesson_marks(7, dataclasses.replace(patched, patching=streaming)) == {}
    assert lesson_marks(7, dataclasses.replace(patched, patching=None)) == {}


def highlight_data(fig) -> dict:
    renderer = fig.select_one({"name": f"{fig.name}_lesson_highlight"})
    assert renderer is not None and fig.select_one({"name": f"{fig.name}_lesson_highlight_label"}) is not None
    return renderer.data_source.data


def test_each_view_draws_its_steps_marks_and_clears_them(loaded, results):
    """Every step's marks on the views that step opens: outlined at the marked index, labelled "lesson: …"."""
    inputs, _ = results
    tokens = np.array([[[loaded.tokenizer.decode([int(i)]) for i in cell] for cell in row] for row in
                       inputs.lens.top_ids], dtype=object)
    state = ExplorerState(family=loaded.family, run=inputs.run, sinks=inputs.sinks, lens=inputs.lens,
                          lens_tokens=tokens, attribution=inputs.attribution, sweep=inputs.sweep,
                          layer=inputs.layer, token=inputs.run.seq_len - 1)
    views = [DiagramView(state), NormsView(state), SimilarityView(state), LogitLensView(state),
             AttributionView(state), InterventionView(state)]
    pn.Column(*views).get_root(Document())
    diagram, norms, similarity, lens, attribution, intervention = views
    figures = {"block_diagram": diagram.diagram.object, "norms_heatmap": norms.heatmap, "norms_lines": norms.lines,
               "similarity_within_layer": similarity.within, "similarity_across_layers": similarity.across,
               "logit_lens": lens.grid, "logit_attribution": attribution.figure, "intervention": intervention.fig}
    for step in range(1, 7):
        marks = lesson_marks(step, inputs)
        state.highlight = marks
        for name, figure_marks in marks.items():
            data = highlight_data(figures[name])
            labelled = [at for at, label in zip(data["at"], data["label"]) if label]
            assert labelled == [list(m["at"]) if isinstance(m["at"], tuple) else m["at"] for m in figure_marks], name
            assert all(label.startswith("lesson: ") for label in data["label"] if label)
    state.highlight = {}
    assert all(not highlight_data(figures[name])["at"] for name in lesson_marks(6, inputs))


def test_the_patching_view_outlines_step_7s_columns_and_names_them_under_the_grid(loaded, patched):
    state = ExplorerState(family=loaded.family, run=patched.run, patching=patched.patching)
    view = PatchingView(state)
    pn.Column(view).get_root(Document())
    grid = view.figures["layer_output"]
    state.highlight = lesson_marks(7, patched)
    data = highlight_data(grid)
    assert data["at"] == marked(7, patched, "patching_layer_output")
    assert data["height"] == [patched.run.n_layers] * 2 and not any(data["shown"])  # whole columns, no label on them
    assert grid.select_one({"name": "patching_layer_output_lesson_highlight_labels"}).text == (
        "lesson (dashed outlines): swapped token · last token")
    state.patching = None  # a new run: its grids are patched again
    assert not highlight_data(grid)["at"]
