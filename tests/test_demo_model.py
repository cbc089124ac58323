"""The shipped demo model: it loads offline through the ordinary loading code, and its model card's figures hold."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from model_backend import capture_token_ids, load_model, logit_lens, residual_norms
from model_backend.norms import attention_share_received, norm_ratios, value_norm_ratios

DEMO = Path(__file__).resolve().parent.parent / "assets" / "demo-gpt2"


@pytest.fixture(scope="module")
def demo():
    return load_model("demo-gpt2")


@pytest.fixture(scope="module")
def measurements():
    return json.loads((DEMO / "measurements.json").read_text())


@pytest.fixture(scope="module")
def heldout_ids(demo):
    return demo.tokenizer.encode((DEMO / "heldout.txt").read_text())


def bos_chunks(token_ids: list[int], bos_id: int, text_tokens: int, keep_partial: bool) -> list[list[int]]:
    """Consecutive pieces of ``text_tokens`` ids, each with BOS first, as the model card defines them."""
    pieces = [token_ids[start : start + text_tokens] for start in range(0, len(token_ids), text_tokens)]
    return [[bos_id, *piece] for piece in pieces if len(piece) == text_tokens or (keep_partial and piece)]


def test_demo_model_is_a_small_gpt2_loaded_from_its_folder(demo):
    assert demo.family.name == "GPT-2" and demo.origin == "shipped with the project"
    assert demo.tokenizer.bos_token == "<|endoftext|>"
    size = sum(f.stat().st_size for f in DEMO.iterdir())
    assert size <= 25 * 2**20


def test_logit_lens_last_row_equals_the_logits(demo):
    run = capture_token_ids(demo, [demo.tokenizer.bos_token_id, *demo.tokenizer.encode("And God said, Let there be")])
    lens = logit_lens(demo, run, k=3)
    assert lens.last_row_max_abs_diff <= 1e-5
    np.testing.assert_array_equal(lens.top_ids[-1, :, 0], run.logits.argmax(-1))


def test_heldout_loss_matches_the_model_card(demo, measurements, heldout_ids):
    total, count = 0.0, 0
    for chunk in bos_chunks(heldout_ids, demo.tokenizer.bos_token_id, measurements["loss_chunk_tokens"] - 1, True):
        logits = torch.from_numpy(capture_token_ids(demo, chunk).logits[:-1])
        total += float(torch.nn.functional.cross_entropy(logits, torch.tensor(chunk[1:]), reduction="sum"))
        count += len(chunk) - 1
    assert total / count == pytest.approx(measurements["heldout_loss"], rel=1e-4)


def test_sink_figures_match_the_model_card(demo, measurements, heldout_ids):
    chunks = bos_chunks(heldout_ids, demo.tokenizer.bos_token_id, measurements["chunk_tokens"] - 1, False)
    share, norm_ratio, value_ratio = 0.0, 0.0, 0.0
    for chunk in chunks:
        run = capture_token_ids(demo, chunk)
        share = share + attention_share_received(run)[:, :, 0].mean(axis=1)
        norm_ratio = norm_ratio + norm_ratios(residual_norms(run))[1:, 0]
        value_ratio = value_ratio + value_norm_ratios(run)[:, :, 0]
    np.testing.assert_allclose(share / len(chunks), measurements["attention_share_on_key0"], atol=1e-4)
    np.testing.assert_allclose(norm_ratio / len(chunks), measurements["norm_ratio_pos0"], rtol=1e-3)
    np.testing.assert_allclose(value_ratio / len(chunks), measurements["value_ratio_pos0"], rtol=1e-3)


def test_the_demo_model_name_works_in_the_export_command(tmp_path):
    from model_backend.__main__ import main

    out = tmp_path / "demo.npz"
    assert main(["export", "--model", "demo-gpt2", "--prompt", "And God said", "--bos", "--out", str(out)]) == 0
    with np.load(out) as exported:
        assert exported["tokens"][0] == "<|endoftext|>" and "layers.5.layer_output" in exported
