"""The guided lessons in the browser, at 1024x768: the Lessons button, then Next through all eight steps on a
random-init GPT-2, each step's text showing the numbers the backend computes for that run in this process; a shared
link opens the same step on its tab (SmolLM2's lessons: ``test_lessons_on_smollm2.py``)."""

from __future__ import annotations

import os
import re
import signal

import numpy as np
import pytest
import torch
from playwright.sync_api import Page, expect

from conftest import load_as_served
from layouts.corrupted_prompt import corrupted_version
from layouts.state import ExplorerState
from model_backend import (activation_patching, capture_run, detect_sinks, direct_logit_attribution, logit_lens,
                           scaling_sweep, token_across_layers, tokens_within_layer)
from model_backend.commitment import commitment_blocks
from model_backend.generation import WriteSettings, capture_generation, generate_tokens
from model_backend.steering import Steering, steering_for
from model_backend.tokens import encode_prompt, token_strings, visible_token
from page_driving.locators import PROMPT_BOX
from page_driving.server import serve_app

FRANCE = "The capital of France is"
STEP_SECONDS = 240_000  # milliseconds a step's text may take to fill (SmolLM2's sweep is 30 passes on 2 cores)
VIEWPORT = {"width": 1024, "height": 768}
# The figure each step highlights first, and where its mark is on screen: the marks' indices, labels, the figure's
# box and the first labelled mark's centre (page pixels), once the figure is drawn with its highlight.
STEP_FIGURES = ("block_diagram", "norms_heatmap", "similarity_within_layer", "logit_lens", "logit_attribution",
                "intervention", "patching_layer_output", "commitment_strip")
HIGHLIGHT = """name => {
    const view = Bokeh.index.query_one(v => v.model.name === name);
    const renderer = view && view.model.renderers.find(r => r.name === name + "_lesson_highlight");
    if (!renderer || !view.has_finished() || !renderer.data_source.data.at.length) return null;
    const data = renderer.data_source.data, glyph = view.views.get_one(renderer).glyph;
    const canvas = view.canvas_view.el.getBoundingClientRect(), i = data.label.findIndex(label => label);
    return {at: [...data.at].filter((_, j) => data.label[j]), labels: [...data.label].filter(label => label),
            figure: {x: canvas.left, y: canvas.top, width: canvas.width, height: canvas.height},
            mark: {x: canvas.left + glyph.sx[i], y: canvas.top + glyph.sy[i]}};
}"""


def expected_numbers(loaded) -> dict[int, list[str]]:
    """What each step's text must show for the France prompt with BOS, computed here from the backend."""
    run, other = capture_run(loaded, FRANCE, bos=True), capture_run(loaded, FRANCE, bos=False)
    probabilities = torch.from_numpy(run.logits_at([-1])[0]).softmax(-1)
    top = int(probabilities.argmax())
    prediction = visible_token(loaded.tokenizer.decode([top]))
    last = run.seq_len - 1
    _, across = token_across_layers(run, last)
    _, within = tokens_within_layer(run, f"layers.{run.n_layers // 2}.layer_output")
    lens = logit_lens(loaded, run, target_id=top, positions=[last])
    attribution = direct_logit_attribution(loaded, run, top)
    sweep = scaling_sweep(loaded, run, top)
    changes = sweep.scaled_logprobs - sweep.clean_logprob
    most = int(np.argmax(np.abs(changes[:-1])))
    sinks = detect_sinks(run).sinks
    first_top = int(np.argmax(lens.top_ids[:, 0, 0] == top))
    labels, terms = attribution.bars()
    patching = activation_patching(loaded, FRANCE, corrupted_version(FRANCE), bos=True)
    pair = patching.pair
    swapped = [p for p, (a, b) in enumerate(zip(pair.clean.tokens, pair.corrupted.tokens)) if a != b]
    followed = max(swapped, key=lambda p: patching.normalised("layer_output")[0, p])
    written, plain, blocks = steered_writing(loaded)
    decided = [i for i, block in enumerate(blocks) if block >= 0]
    marks = {1: [f"block.{min(3, run.n_layers - 1)}"], 2: [sinks[0].position if sinks else 0], 3: [0],
             4: [[first_top, last], [lens.n_rows - 1, None]], 5: [labels[i] for i in np.argsort(-terms)[:3]],
             6: [most, run.n_layers - 1], 7: [followed, pair.clean.seq_len - 1],
             8: [min(decided, key=lambda i: (blocks[i], i))] if decided else []}
    differs = next((i for i, (a, b) in enumerate(zip(written, plain)) if a != b), None)
    return {"marks": marks,
        1: [f"{run.seq_len} tokens", f"all {run.n_layers} blocks", f"{len(probabilities):,} logits", prediction,
            f"p = {float(probabilities[top]):.2f}"],
        2: [f"{detect_sinks(run).at(0).norm_ratio:.1f}×", f"{detect_sinks(other).at(0).norm_ratio:.1f}×",
            f"{detect_sinks(run).at(0).attention_share:.0%}"],
        3: [f"{across[0, 1]:.2f}", f"{across[0, -2]:.2f}", f"{within[0, 1:].mean():.2f} with the other tokens"],
        4: [f"p = {lens.target_probs[-1, 0]:.2f}", prediction],
        5: [f"is {attribution.logit:.3f}", f"sum to {attribution.total:.4f}", f"logit is {attribution.logit:.4f}"],
        6: [f"= {sweep.clean_logprob:.3f}", f"Scaling block {most} moves it most", f"({changes[most]:+.3f})"],
        7: [f"= {pair.clean_metric:.2f}", f"one with {pair.corrupted_metric:.2f}"],
        8: [f"{len(written)} tokens", "".join(written).strip(),
            f"at written token {differs + 1}" if differs is not None else "writes the same as without",
            f"{len(decided)} of the {len(written)} written tokens" if decided else "None of the"],
    }


def steered_writing(loaded) -> tuple[list[str], list[str], list[int]]:
    """Lesson 8's continuation of the France prompt with BOS, steered as the page's defaults say (clamped to the
    model's blocks), the plain one, and each written token's commitment block."""
    block = min(ExplorerState.param.steer_block.default, loaded.n_layers - 1)
    steering = Steering(block, ExplorerState.param.steer_toward.default, ExplorerState.param.steer_away.default,
                        ExplorerState.param.steer_alpha.default)
    prompt_ids = encode_prompt(loaded, FRANCE, bos=True)
    settings = WriteSettings(max_new_tokens=ExplorerState.param.max_new_tokens.default)
    steered = generate_tokens(loaded, prompt_ids, settings, steering_for(loaded, steering, bos=True))
    plain = generate_tokens(loaded, prompt_ids, settings)
    blocks = commitment_blocks(loaded, capture_generation(loaded, steered, prompt=FRANCE, bos=True),
                               steered.generated_from)
    return (token_strings(loaded, steered.generated_ids.tolist()), token_strings(loaded, plain.generated_ids.tolist()),
            [int(block) for block in blocks])


def step_through_lessons(page: Page, url: str, expected: dict[int, list[str]], *, presenter: bool = False) -> None:
    """Open the page, start the lessons and check every step's title, tab and numbers, with a screenshot each."""
    page.set_viewport_size(VIEWPORT)
    page.goto(url + ("?presenter=true" if presenter else ""))
    expect(page.locator(".status-line")).to_contain_text("tokens", timeout=STEP_SECONDS)
    page.get_by_role("button", name="▶ Lessons").click()
    tabs = ("Block diagram", "Norms & sinks", "Cosine similarity", "Logit lens", "Logit attribution", "Intervention",
            "Patching", "Write")
    for step in range(1, 9):
        if step > 1:
            page.get_by_role("button", name="Next ▶").click()
        expect(page.locator(".lesson-title")).to_contain_text(f"Lesson {step} of 8", timeout=STEP_SECONDS)
        text = page.locator(f".lesson-text[data-step='{step}']")
        for number in expected[step]:
            expect(text).to_contain_text(number, timeout=STEP_SECONDS)
        expect(page.locator(".bk-tab.bk-active")).to_have_text(tabs[step - 1])
        expect(page).to_have_url(re.compile(rf"lesson={step}\b"))
        if expected["marks"][step]:
            check_the_highlight(page, STEP_FIGURES[step - 1], expected["marks"][step])
        else:  # lesson 8 on a model that decides no word before its readout: nothing to mark, and nothing marked
            assert not (page.evaluate(HIGHLIGHT, STEP_FIGURES[step - 1]) or {}).get("at")
            assert inside_the_viewport(page.locator(".lesson-text").bounding_box())
        if presenter:  # the projector's larger text still leaves two thirds of the screen to the figures
            assert page.locator(".lesson-area").bounding_box()["height"] <= VIEWPORT["height"] / 3
        page.screenshot(path=f"test-artifacts/lesson-{step}-{expected['name']}{'-presenter' * presenter}.png")
    expect(page.get_by_role("button", name="Next ▶")).to_be_disabled()


def inside(box: dict, area: dict) -> bool:
    return (box["x"] >= area["x"] and box["y"] >= area["y"] and box["x"] + box["width"] <= area["x"] + area["width"]
            and box["y"] + box["height"] <= area["y"] + area["height"])


def inside_the_viewport(box: dict) -> bool:
    return inside(box, {"x": 0, "y": 0, **VIEWPORT})


def overlaps(box: dict, area: dict) -> bool:
    return (box["x"] < area["x"] + area["width"] and area["x"] < box["x"] + box["width"]
            and box["y"] < area["y"] + area["height"] and area["y"] < box["y"] + box["height"])


def check_the_highlight(page: Page, figure: str, marks: list) -> None:
    """The step's figure carries the highlight at the backend's indices, labelled as the lesson's; the lesson text is
    on the 1024x768 screen, and the page has scrolled the figure's mark into view below it."""
    page.wait_for_function(f"() => ({HIGHLIGHT})({figure!r})?.at.length === {len(marks)}", timeout=STEP_SECONDS)
    page.wait_for_timeout(1000)  # the page scrolls to the mark once the figure is drawn
    shown = page.evaluate(HIGHLIGHT, figure)
    assert shown["at"] == marks, figure
    assert all(label.startswith("lesson: ") for label in shown["labels"])
    text, panel = page.locator(".lesson-text").bounding_box(), page.locator(".lesson-area").bounding_box()
    assert inside_the_viewport(text), (figure, text)
    below_the_lesson = {"x": 0, "y": panel["y"] + panel["height"], "width": VIEWPORT["width"],
                        "height": VIEWPORT["height"] - panel["y"] - panel["height"]}
    assert overlaps(shown["figure"], below_the_lesson), (figure, shown["figure"])
    assert inside({**shown["mark"], "width": 0, "height": 0}, below_the_lesson), (figure, shown["mark"], panel)


@pytest.fixture(scope="module")
def lesson_app(tiny_gpt2_dir, tmp_path_factory):
    """A server on the tiny random-init GPT-2 alone, so that the page opens on it."""
    process, app = serve_app(str(tiny_gpt2_dir), tmp_path_factory.mktemp("lessons") / "server.log")
    yield app
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=10)
    assert "Traceback" not in app.log_without_closed_tab_reports(), app.log()


@pytest.mark.parametrize("presenter", [False, True], ids=["plain", "presenter"])
def test_the_lessons_show_a_random_gpt2s_own_numbers(page: Page, lesson_app, tiny_gpt2_dir, presenter):
    expected = {**expected_numbers(load_as_served(tiny_gpt2_dir)), "name": "random-gpt2"}
    expected[2].append("is no sink")  # trained for no steps: no sink with BOS
    os.makedirs("test-artifacts", exist_ok=True)
    step_through_lessons(page, lesson_app.url, expected, presenter=presenter)


def test_a_shared_link_opens_the_same_step_on_its_tab(page: Page, lesson_app):
    page.set_viewport_size(VIEWPORT)
    page.goto(lesson_app.url + "?lesson=3")
    expect(page.locator(".lesson-title")).to_contain_text("Lesson 3 of 8: Cosine similarity", timeout=STEP_SECONDS)
    expect(page.locator(".bk-tab.bk-active")).to_have_text("Cosine similarity", timeout=STEP_SECONDS)
    expect(page.locator(".lesson-text[data-step='3']")).to_contain_text("The last token", timeout=STEP_SECONDS)
    page.get_by_role("button", name="End lessons").click()
    expect(page.get_by_role("button", name="▶ Lessons")).to_be_visible()
    expect(page).to_have_url(re.compile(r"lesson=0"))


def test_the_lens_lesson_sets_the_france_prompt_and_runs_it(page: Page, lesson_app, tiny_gpt2_dir):
    """A class on another prompt: lesson 4 puts the France prompt in the box, runs it (the BOS switch left as the
    class had it) and reads its answer."""
    tiny = load_as_served(tiny_gpt2_dir)
    france = capture_run(tiny, FRANCE, bos=False)
    prediction = visible_token(tiny.tokenizer.decode([int(france.logits_at([-1])[0].argmax())]))
    page.set_viewport_size(VIEWPORT)
    page.goto(lesson_app.url + "?prompt=Hello+there&bos=false&lesson=3")
    expect(page.locator(".status-line")).to_contain_text(" 2 tokens ", timeout=STEP_SECONDS)
    page.get_by_role("button", name="Next ▶").click()
    expect(page.locator(".status-line")).to_contain_text(f" {france.seq_len} tokens ", timeout=STEP_SECONDS)
    expect(page.locator(PROMPT_BOX)).to_have_value(FRANCE)
    expect(page.locator(".lesson-text[data-step='4']")).to_contain_text(f"{prediction} first comes out on top",
                                                                        timeout=STEP_SECONDS)
