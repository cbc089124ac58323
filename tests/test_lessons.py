"""The guided lessons without a browser: each step's text holds the backend's numbers for the run, tokens stay
text, a model without a sink is told so and why, the steps set their views, and the step lives in the URL."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from conftest import PROMPT, run_coroutine
from layouts.lesson_text import LessonInputs, holds_from, lesson_text, stays_text
from layouts.state import DEFAULT_PROMPT, ExplorerState
from model_backend import (capture_run, detect_sinks, direct_logit_attribution, logit_lens, scaling_sweep,
                           token_across_layers)
from model_backend.norms import norm_ratios, residual_norms
from model_backend.tokens import visible_token
from viz_app.lessons import LESSON_TABS, step_settings
from viz_app.url_state import url_choices, url_query


def inputs_for(loaded, run, **results) -> LessonInputs:
    """What the session hands the lessons for ``run``: its prediction, probability and vocabulary."""
    probabilities = torch.from_numpy(run.logits_at([-1])[0]).softmax(-1)
    top = int(probabilities.argmax())
    return LessonInputs(run, detect_sinks(run), loaded.tokenizer.decode([top]), float(probabilities[top]),
                        len(probabilities), min(3, run.n_layers - 1), **results)


def test_the_residual_stream_lesson_names_the_runs_sizes_and_prediction(loaded, run):
    inputs = inputs_for(loaded, run)
    text = lesson_text(1, inputs)
    hidden = run["layers.0.layer_input"].shape[-1]
    for number in (f"<b>{run.seq_len}</b> tokens", f"<b>{hidden}</b> numbers", f"<b>{run.n_layers}</b>",
                   f"<b>{inputs.vocabulary:,}</b> logits", f"p = <b>{inputs.prediction_probability:.2f}</b>"):
        assert number in text
    assert visible_token(inputs.prediction) in text


def test_the_sink_lesson_compares_bos_and_says_why_a_random_model_has_none(loaded, run):
    other = capture_run(loaded, PROMPT, bos=False)
    text = lesson_text(2, inputs_for(loaded, run, other_bos_run=other, other_bos_sinks=detect_sinks(other)))
    first, other_first = detect_sinks(run).at(0), detect_sinks(other).at(0)
    assert text.index("With BOS") < text.index("Without BOS")
    assert f"<b>{first.norm_ratio:.1f}×</b>" in text and f"<b>{other_first.norm_ratio:.1f}×</b>" in text
    assert f"<b>{first.attention_share:.0%}</b>" in text
    assert not detect_sinks(run).sinks and "No sink here" in text and "training" in text


def test_a_sink_is_told_with_the_block_it_holds_from():
    ratios = np.array([1.0, 9.0, 2.0, 50.0, 60.0])
    assert holds_from(ratios >= 4) == 3
    assert holds_from(np.array([True, True])) == 0 and holds_from(np.array([True, False])) is None
    assert stays_text(28, 28) == " and stays there" and "block 29" in stays_text(5, 30)
    assert "loses" in stays_text(5, None)


def test_the_cosine_lesson_reads_the_last_tokens_drift(loaded, run):
    text = lesson_text(3, inputs_for(loaded, run))
    _, across = token_across_layers(run, run.seq_len - 1)
    assert f"<b>{across[0, 1]:.2f}</b>" in text and f"<b>{across[0, -2]:.2f}</b>" in text
    assert "No sink here" in text


def test_the_lens_lesson_ends_at_the_logits_and_finds_the_prediction(loaded, run):
    inputs = inputs_for(loaded, run)
    target_id = int(run.logits_at([-1])[0].argmax())
    lens = logit_lens(loaded, run, target_id=target_id, positions=[run.seq_len - 1])
    text = lesson_text(4, LessonInputs(**{**inputs.__dict__, "lens": lens, "target": inputs.prediction}))
    assert f"<b>{lens.last_row_max_abs_diff:.1e}</b>" in text
    assert f"p = <b>{lens.target_probs[-1, 0]:.2f}</b>." in text
    assert "Reading the logit lens" in lesson_text(4, inputs)


def test_the_attribution_lesson_shows_the_bars_sum_beside_the_logit(loaded, run):
    inputs = inputs_for(loaded, run)
    attribution = direct_logit_attribution(loaded, run)
    text = lesson_text(5, LessonInputs(**{**inputs.__dict__, "attribution": attribution}))
    labels, terms = attribution.bars()
    assert f"<b>{attribution.logit:.3f}</b>" in text and f"<b>{terms.sum():.4f}</b>" in text
    assert f"(<b>{terms.max():+.2f}</b>)" in text


def test_the_intervention_lesson_measures_the_last_blocks_scale_cancelling(loaded, run):
    inputs = inputs_for(loaded, run)
    target_id = int(run.logits_at([-1])[0].argmax())
    sweep = scaling_sweep(loaded, run, target_id)
    text = lesson_text(6, LessonInputs(**{**inputs.__dict__, "sweep": sweep, "target": inputs.prediction}))
    changes = sweep.scaled_logprobs - sweep.clean_logprob
    assert f"<b>{sweep.clean_logprob:.3f}</b>" in text and f"<b>{changes[-1]:+.1e}</b>" in text
    most = int(np.argmax(np.abs(changes[:-1])))
    assert abs(changes[-1]) < 1e-3  # the norm's epsilon, visible against a random model's small stream
    assert f"Scaling block <b>{most}</b>" in text and f"(<b>{changes[most]:+.3f}</b>)" in text
    unfinished = LessonInputs(**{**inputs.__dict__, "sweep": None})
    assert f"0 of {run.n_layers} blocks so far" in lesson_text(6, unfinished)


def test_the_writing_lesson_says_where_the_steering_turned_and_where_each_word_was_decided(loaded, run):
    from layouts.writing_view import WrittenText

    inputs = inputs_for(loaded, run)
    writing = WrittenText(prompt_tokens=["The"], tokens=[" Rome", ".", " <b>"], probabilities=[0.5, 0.4, 0.3],
                          alternatives=[[(" Paris", 0.2)]] * 3, n_layers=run.n_layers, settings="greedy",
                          commitment=[2, -1, 1], done=True, steering="+1·v at block 1",
                          plain=[" Paris", ".", " <b>"])
    text = lesson_text(8, LessonInputs(**{**inputs.__dict__, "writing": writing}))
    assert "<b>3 tokens</b>" in text and "at written token <b>1</b>" in text and "&lt;b&gt;" in text
    assert "Without the steering it writes <b> Paris. &lt;b&gt;</b>" in text
    assert "<b>2</b> of the 3 written tokens" in text and "from block <b>1</b>" in text  # ␣<b> at block 1
    same = LessonInputs(**{**inputs.__dict__, "writing": WrittenText(**{**writing.__dict__, "plain": writing.tokens,
                                                                        "commitment": [-1, -1, -1]})})
    assert "writes the same as without" in lesson_text(8, same) and "None of the 3" in lesson_text(8, same)
    writing_now = LessonInputs(**{**inputs.__dict__, "writing": WrittenText(**{**writing.__dict__, "done": False})})
    assert "Writing… 3 tokens so far" in lesson_text(8, writing_now)


def test_tokens_in_lesson_texts_stay_text(loaded):
    run = capture_run(loaded, "<b>bold</b> & <script>x</script>", bos=True)
    other = capture_run(loaded, run.prompt, bos=False)
    inputs = inputs_for(loaded, run, other_bos_run=other, other_bos_sinks=detect_sinks(other))
    for step in (1, 2, 3):
        text = lesson_text(step, inputs)
        assert "<script>" not in text and "<b>bold" not in text


def test_a_sink_lesson_on_a_sink_names_its_signals(loaded, run):
    """Position 0 made a sink by its numbers: the text gives its ratio, the block it holds from and its share."""
    report = detect_sinks(run)
    first = report.at(0)
    sink = type(first)(0, first.token, 120.0, 0.81, run.n_layers, 0.2, ("norm", "attention", "value"))
    forced = type(report)([sink, *report.evidence[1:]], report.n_layers, report.residual_norms)
    text = lesson_text(2, LessonInputs(**{**inputs_for(loaded, run).__dict__, "sinks": forced}))
    since = holds_from(norm_ratios(residual_norms(run)[1:])[:, 0] >= 4)
    assert "<b>120.0×</b>" in text and "<b>81%</b>" in text and "<b>0.20×</b>" in text
    assert (f"from block <b>{since}</b> on" in text) == (since is not None)
    assert "No sink here" not in text


def test_each_step_opens_its_tab_and_what_its_view_needs(run):
    state = ExplorerState(run=run, prompt="Other words", pinned=["embeddings"], bos=False, bos_token="<s>")
    assert [step_settings(step, state, " Paris")["shown_tab"] for step in range(1, 9)] == list(LESSON_TABS)
    first = step_settings(1, state, "")
    assert first["pinned"] == ["embeddings", f"block.{min(3, run.n_layers - 1)}"]
    assert step_settings(2, state, "")["bos"] is True
    assert step_settings(2, ExplorerState(bos=False), "")["bos"] is False  # a model without a BOS token
    assert step_settings(3, state, "")["token"] == run.seq_len - 1
    assert step_settings(4, state, " Paris") == {"shown_tab": "Logit lens", "prompt": DEFAULT_PROMPT,
                                                 "raw_lens": False, "target": ""}
    state.prompt = DEFAULT_PROMPT
    assert step_settings(4, state, " Paris")["target"] == " Paris"


@pytest.mark.parametrize("text, step, noted", [("3", 3, False), ("0", 0, False), ("8", 8, False), ("9", None, True),
                                                ("²", None, True), ("-1", None, True)])
def test_the_lesson_step_lives_in_the_url(text, step, noted):
    choices, notes = url_choices({"lesson": [text.encode()]})
    assert choices.get("lesson") == step and bool(notes) == noted
    assert "lesson=3" in url_query(ExplorerState(lesson=3))


def test_the_session_opens_a_step_and_writes_its_text_from_both_bos_runs(tiny_gpt2_dir):
    """Lesson 2 on a page without BOS: the step switches BOS on, runs again, opens the norms tab and writes the
    sink numbers of the run with BOS and of one pass without it."""
    from viz_app.session import ExplorerSession, shared_model

    session = ExplorerSession([str(tiny_gpt2_dir)], state=ExplorerState(bos=False))  # switching BOS runs again
    session.outcomes.append(shared_model(str(tiny_gpt2_dir)))
    session.loaded = session.outcomes[0].loaded
    session.state.bos_token = session.loaded.tokenizer.bos_token
    tasks = session.launcher.__self__.running

    async def open_lesson_two():
        await session.run_prompt()
        session.state.lesson = 2
        while tasks:
            await asyncio.gather(*tasks)

    run_coroutine(open_lesson_two())
    state = session.state
    assert (state.shown_tab, state.bos, state.token, state.run.bos) == ("Norms & sinks", True, 0, True)
    without = detect_sinks(capture_run(session.loaded, DEFAULT_PROMPT, bos=False)).at(0)
    assert f"{state.sinks.at(0).norm_ratio:.1f}×" in state.lesson_text
    assert "Without BOS: position 0 (<code>The</code>)" in state.lesson_text
    assert f"{without.norm_ratio:.1f}×" in state.lesson_text
