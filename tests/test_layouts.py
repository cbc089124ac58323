"""The views built in-process from a tiny model's run: no server, no browser."""

from __future__ import annotations

import numpy as np
import panel as pn
from bokeh.document import Document
from bokeh.document.events import ColumnsStreamedEvent
from bokeh.events import RangesUpdate

from layouts.attention_view import AttentionView
from layouts.cards import PartCard, block_identity_error
from layouts.diagram_parts import diagram_parts, parse_part_id, part_at
from layouts.diagram_view import DiagramView
from layouts.intervention_view import InterventionView
from layouts.logit_lens_view import LogitLensView, lens_cells
from layouts.norms_view import NormsView, sink_summary
from layouts.similarity_view import SimilarityView
from layouts.state import ExplorerState
from layouts.style import title_lines
from model_backend.families import FAMILIES
from model_backend import capture_run, capture_token_ids, detect_sinks, joined_lens, logit_lens
from model_backend.steering import Steering, steering_for
from model_backend.steering_size import steering_report

HTML_PROMPT = "<img src=x onerror=alert(1)> & <b>"


def filled_state(loaded, prompt: str) -> ExplorerState:
    """A state holding everything the views draw, computed the way the app does."""
    run = capture_run(loaded, prompt, bos=True)
    lens = logit_lens(loaded, run, target_id=11)
    tokens = [[[loaded.tokenizer.decode([int(i)]) for i in cell] for cell in row] for row in lens.top_ids]
    return ExplorerState(family=loaded.family, run=run, sinks=detect_sinks(run), lens=lens,
                         lens_tokens=np.array(tokens, dtype=object), pattern=run.attention_probabilities(0),
                         pattern_layer=0,
                         pinned=["block.1", "attention.0", "token_embeddings"])


def test_every_view_renders_from_a_run(gpt2):
    state = filled_state(gpt2, HTML_PROMPT)
    views = [DiagramView(state), NormsView(state), SimilarityView(state), LogitLensView(state), AttentionView(state),
             InterventionView(state)]
    pn.Column(*views).get_root(Document())
    n = state.run.seq_len
    norms, similarity, lens, attention = views[1], views[2], views[3], views[4]
    assert norms.heatmap.title.text.startswith(f"Residual norm · {n} tokens")
    assert similarity.within.title.text.endswith(f"· {n} tokens")
    assert len(lens.cells.data["top"]) == state.lens.n_rows * n
    assert attention.pattern_fig.title.text == f"Block 0, mean over heads · {n} tokens"


def test_a_new_run_updates_the_same_figures_in_place(gpt2):
    state = filled_state(gpt2, HTML_PROMPT)
    norms, lens = NormsView(state), LogitLensView(state)
    figures = (norms.heatmap, norms.lines, lens.grid)
    shorter = filled_state(gpt2, "Two words")
    state.param.update(run=shorter.run, sinks=shorter.sinks, lens=shorter.lens, lens_tokens=shorter.lens_tokens)
    assert (norms.heatmap, norms.lines, lens.grid) == figures
    assert norms.heatmap_image.data["image"][0].shape == (state.run.n_layers + 1, shorter.run.seq_len)
    assert len(lens.cells.data["top"]) == shorter.lens.n_rows * shorter.run.seq_len
    assert f"· {shorter.run.seq_len} tokens" in lens.grid.title.text


def test_a_lens_read_in_parts_sends_only_the_new_cells(gpt2):
    state = filled_state(gpt2, HTML_PROMPT)
    full, tokens, n = state.lens, state.lens_tokens, state.run.seq_len
    last = logit_lens(gpt2, state.run, target_id=11, positions=range(n - 3, n))
    first = logit_lens(gpt2, state.run, target_id=11, positions=range(0, n - 3))
    state.param.update(lens=last, lens_tokens=tokens[:, n - 3:])
    lens = LogitLensView(state)
    document = Document()
    document.add_root(lens.grid)
    streamed = []
    document.on_change(lambda event: isinstance(event, ColumnsStreamedEvent) and streamed.append(
        sorted(set(event.data["position"]))))
    both = joined_lens([last, first])
    state.param.update(lens=both, lens_tokens=tokens)
    assert streamed == [list(range(0, n - 3))]
    everything = lens_cells(full, tokens)
    assert sorted(zip(lens.cells.data["position"], lens.cells.data["row"], lens.cells.data["top"])) == sorted(
        zip(everything["position"], everything["row"], everything["top"]))
    state.param.update(lens=full, lens_tokens=tokens)
    assert len(streamed) == 1  # nothing new to send
    state.param.update(run=filled_state(gpt2, "Two words").run)
    assert len(streamed) == 1


def test_a_forgotten_lens_is_asked_for_again_even_before_any_part_arrived(gpt2):
    """A target changed twice before the first read published: the lens is empty both times, and the view shown must
    still ask for the second target's lens."""
    state = filled_state(gpt2, HTML_PROMPT)
    lens = LogitLensView(state)
    asked, first = [], state.target_id
    state.param.watch(lambda _event: asked.append(state.target_id), "lens_requested")
    state.forget("lens", "lens_tokens")
    state.target_id = 11
    state.forget("lens", "lens_tokens")
    assert asked == [first, 11] and lens.check.object.startswith("<p class='lens-check'>Reading")


def test_dragging_the_lens_grid_tells_the_state_which_positions_it_shows(gpt2):
    state = filled_state(gpt2, HTML_PROMPT)
    lens = LogitLensView(state)
    lens.grid._trigger_event(RangesUpdate(lens.grid, x0=2.7, x1=9.2, y0=0, y1=1))
    assert state.lens_window == (3, 9)
    lens.grid._trigger_event(RangesUpdate(lens.grid, x0=-0.5, x1=8.5, y0=0, y1=1))  # nine cells, edge to edge
    assert state.lens_window == (0, 8)
    lens.grid._trigger_event(RangesUpdate(lens.grid, x0=-4.5, x1=400.0, y0=0, y1=1))
    assert state.lens_window == (0, state.run.seq_len - 1)


def test_cards_escape_tokens_and_report_the_identity_check(gpt2):
    state = filled_state(gpt2, HTML_PROMPT)
    card = PartCard("block.1", state.family, state.run.n_layers, on_close=print)
    card.show(state.run, state.sinks)
    html = "".join(pane.object for pane in card.layout.select(pn.pane.HTML))
    assert "blocks.1.hook_resid_post" in html and "transformer.h.1" in html
    assert "Identity check" in html
    assert block_identity_error(state.run, 1) < 1e-4
    assert "<img" not in sink_summary(state.run, state.sinks)


def test_the_steered_block_s_card_says_what_was_added_and_how_large_beside_the_stream(gpt2):
    vector = steering_for(gpt2, Steering(block=1, toward=" dog", away=" cat<b>", alpha=4.0))
    run = capture_token_ids(gpt2, gpt2.tokenizer.encode("The capital of France is"), steering=vector)
    report = steering_report(run, vector)
    shown = {}
    for block in (0, 1):
        card = PartCard(f"block.{block}", gpt2.family, run.n_layers, on_close=print)
        card.show(run, detect_sinks(run))
        shown[block] = "".join(pane.object for pane in card.layout.select(pn.pane.HTML))
    assert "Steered" not in shown[0]
    assert "+4·v added to <code>layers.1.layer_input</code>" in shown[1] and "&lt;b&gt;" in shown[1]
    assert f"|α·v| = {report.vector_norm:.1f}, {report.ratio:.2f}× the median norm" in shown[1]


def test_part_ids_round_trip_and_clicks_find_boxes():
    for family in FAMILIES:
        parts = diagram_parts(family, n_layers=3, open_layer=2)
        for part in parts:
            assert parse_part_id(part.id, family, 3) is not None
            assert part_at(parts, part.x, part.y) is part
        assert parse_part_id("block.3", family, 3) is None
        assert parse_part_id("nonsense", family, 3) is None
        has_mid = family.has_value("layer_mid")
        assert (parse_part_id("attention_add.0", family, 3) is not None) == has_mid


def test_a_presenter_title_wraps_at_its_dots_then_between_words_and_only_once():
    title = "Direct logit attribution of ␣Paris at position 5 · 6 tokens · magenta: above the colour range"
    wrapped = title_lines(title, 35)
    assert wrapped.split("\n") == ["Direct logit attribution of ␣Paris", "at position 5 · 6 tokens",
                                    "magenta: above the colour range"]
    assert title_lines(wrapped, 35) == wrapped
    assert title_lines(title, 200) == title


def test_alpha_zero_is_explained_on_the_intervention_figure_from_the_models_vocabulary(llama):
    """Llama's blocks have no biases: a zeroed stream stays zero to the end, so every point at α = 0 is the uniform
    output's log p, -ln(vocabulary size), which the figure names and draws."""
    from viz_app.notebook import intervention_view

    run = capture_run(llama, "The capital of France is", bos=True)
    view = intervention_view(llama, run, alpha=0.0)
    sweep, vocabulary = view.state.sweep, run.logits.shape[-1]
    np.testing.assert_allclose(sweep.scaled_logprobs, -np.log(vocabulary), atol=1e-5)
    note, = view.fig.select(name="intervention_zero_note")
    line, = view.fig.select(name="intervention_uniform")
    assert note.visible and line.visible and line.location == -np.log(vocabulary)
    assert f"−ln {vocabulary:,} = −{np.log(vocabulary):.2f}" in note.text
    assert view.fig.y_range.start < -np.log(vocabulary) < view.fig.y_range.end
    shown = intervention_view(llama, run, alpha=0.5)
    assert not shown.fig.select(name="intervention_zero_note")[0].visible


def test_the_scale_each_block_button_carries_no_tooltip_to_run_past_the_screens_right_edge():
    view = InterventionView(ExplorerState())
    button, = [widget for widget in view.layout().select(pn.widgets.Button) if widget.name == "Scale each block"]
    assert button.description is None
