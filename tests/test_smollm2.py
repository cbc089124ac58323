"""SmolLM2-135M-Instruct, the real pretrained model the package index carries: prepared by the real code (from the
cache, or downloaded once), it predicts " Paris", its lens ends on its logits, and it has an attention sink at
position 0, which the page opened offline labels.

Without the package index these tests are skipped, saying why, unless ``RSE_REQUIRE_SMOLLM2=1`` (set by CI, which
prepares the model first) turns that into a failure."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
from conftest import package_index_model_or_skip
from playwright.sync_api import Page, expect

from model_backend import capture_run, detect_sinks, load_model, logit_lens, residual_norms
from model_backend.model_names import SMOLLM2, SMOLLM2_COPY
from model_backend.norms import attention_share_received, norm_ratios
from model_backend.package_index import MARKER, prepared_folder
from page_driving.server import serve_app

FRANCE = "The capital of France is"
PAGE_SECONDS = 120_000


@pytest.fixture(scope="module")
def smollm2():
    return package_index_model_or_skip(lambda: load_model(SMOLLM2), "SmolLM2", "RSE_REQUIRE_SMOLLM2")


@pytest.fixture(scope="module")
def france(smollm2):
    return capture_run(smollm2, FRANCE, bos=True)


def test_the_copy_comes_from_the_checked_package_index_file_and_says_so(smollm2):
    assert smollm2.origin == SMOLLM2_COPY.origin or smollm2.origin == "HF cache"
    if smollm2.origin != SMOLLM2_COPY.origin:
        pytest.skip("the HF cache serves the original weights here")
    folder = prepared_folder(SMOLLM2_COPY)
    assert folder is not None and smollm2.folder == folder
    assert json.loads((folder / MARKER).read_text())["gguf_sha256"] == SMOLLM2_COPY.gguf_sha256
    card = (folder / "README.md").read_text()
    assert SMOLLM2_COPY.gguf_parts[0].sha256 in card and SMOLLM2_COPY.gguf_sha256 in card
    assert "Q4_1" in card and "Apache-2.0" in card and "differs slightly" in card
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())


def test_it_is_llama_shaped_with_its_own_bos(smollm2):
    assert smollm2.family.name == "Llama"
    assert (smollm2.n_layers, smollm2.config.hidden_size, smollm2.n_heads, smollm2.n_kv_heads) == (30, 576, 9, 3)
    assert smollm2.tokenizer.bos_token == "<|im_start|>"


def test_paris_is_the_top_prediction(smollm2, france):
    assert france.tokens[0] == "<|im_start|>"
    assert smollm2.tokenizer.decode([int(france.logits[-1].argmax())]) == " Paris"
    without_bos = capture_run(smollm2, FRANCE, bos=False)
    assert smollm2.tokenizer.decode([int(without_bos.logits[-1].argmax())]) == " Paris"


def test_the_lens_last_row_is_the_logits(smollm2, france):
    lens = logit_lens(smollm2, france, k=5)
    assert lens.last_row_max_abs_diff <= 1e-5
    np.testing.assert_array_equal(lens.top_ids[-1, :, 0], france.logits.argmax(-1))
    assert smollm2.tokenizer.decode([int(lens.top_ids[-1, -1, 0])]) == " Paris"


def test_position_0_is_an_attention_sink(france):
    sinks = detect_sinks(france)
    assert [sink.position for sink in sinks.sinks] == [0]
    sink = sinks.sinks[0]
    assert sink.norm_ratio > 20 and set(sink.signals) == {"norm", "attention", "value"}
    assert float(norm_ratios(residual_norms(france))[1:, 0].max()) > 20
    share_on_key_0 = attention_share_received(france)[:, :, 0].mean(axis=1)  # per block, mean over heads
    assert (share_on_key_0 >= 0.30).sum() >= 12, share_on_key_0


def test_the_offline_page_opens_on_smollm2_and_labels_its_sink(page: Page, smollm2, tmp_path):
    """The default model list on a machine with no Hub: gpt2 is skipped, SmolLM2 loads from its prepared copy."""
    process, app = serve_app(None, tmp_path / "server.log")
    try:
        page.goto(app.url)
        status = page.locator(".status-line")
        expect(status).to_contain_text(f"{SMOLLM2} (", timeout=PAGE_SECONDS)
        expect(status).to_contain_text("tokens", timeout=PAGE_SECONDS)
        expect(status).not_to_contain_text("…", timeout=PAGE_SECONDS)
        expect(page.get_by_text("gpt2: not cached", exact=False).first).to_be_visible()
        page.locator(".bk-tab", has_text="Norms").click()
        summary = page.locator("table.sink-summary")
        expect(summary).to_contain_text("<|im_start|>", timeout=PAGE_SECONDS)
        expect(summary).to_contain_text("norm, attention, value")
        page.get_by_text("What the columns measure").click()
        expect(page.get_by_text("median over blocks 7-22 (fires at ≥ 4×)", exact=False)).to_be_visible()
        page.locator(".bk-tab", has_text="Logit lens").click()
        expect(page.get_by_text("max |difference| = 0.00e+00", exact=False)).to_be_visible(timeout=PAGE_SECONDS)
        page.screenshot(path="test-artifacts/smollm2-offline-lens.png")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    assert "Traceback" not in app.log_without_closed_tab_reports(), app.log()


def test_the_lens_check_is_exact_after_every_logit_was_read(smollm2):
    """The page reads every position's logits for other views first; a lens chunk's check must still compare
    matmuls of one shape (it read 1.7e-05 against the full read before)."""
    run = capture_run(smollm2, "The capital of France is Paris. The capital of Germany is", bos=True)
    assert run.logits.shape[0] == 13
    chunks = [logit_lens(smollm2, run, k=5, positions=positions) for positions in (np.arange(8, 13), np.arange(8))]
    assert [chunk.last_row_max_abs_diff for chunk in chunks] == [0.0, 0.0]
