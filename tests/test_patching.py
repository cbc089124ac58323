"""Activation patching against an independent computation: for every block, position and site, one full forward of
the corrupted prompt with a plain forward hook writing the clean run's value (itself read by plain hooks on a full
clean forward) into the module that makes it; on GPT-2, Llama, a parallel GPT-NeoX, a sandwich Gemma 2, Gemma 3
(local and global attention layers, each with its own mask and rotary table) and a post-norm OLMo-2, BOS on and
off."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from transformers import Gemma2Config, Gemma3TextConfig, GPTNeoXConfig, LlamaConfig, Olmo2Config

from family_reference import TINY_SHAPE, save_tiny_family_model

from layouts.corrupted_prompt import corrupted_version
from layouts.lesson_text import LessonInputs, lesson_text
from model_backend import PromptError, load_model
from model_backend.patching import PATCHED_SITES, activation_patching, patched_blocks, patching_pair
from page_driving.tiny_models import save_tiny_gpt2

CLEAN, CORRUPTED = "The capital of France is", "The capital of Italy is"
ANSWER, WRONG = " Paris", " Rome"

# Where each site is written, as plain module paths of each checkpoint (not the project's family maps). Gemma 2/3
# and OLMo-2 write each sublayer into the stream after its post-norm, under the same module names.
POST_NORMED_SITES = {"layer_output": "model.layers.{i}",
                     "attention_output": "model.layers.{i}.post_attention_layernorm",
                     "mlp_output": "model.layers.{i}.post_feedforward_layernorm"}
SITE_MODULES = {
    "gpt2": {"layer_output": "transformer.h.{i}", "attention_output": "transformer.h.{i}.attn",
             "mlp_output": "transformer.h.{i}.mlp"},
    "llama": {"layer_output": "model.layers.{i}", "attention_output": "model.layers.{i}.self_attn",
              "mlp_output": "model.layers.{i}.mlp"},
    "gpt_neox": {"layer_output": "gpt_neox.layers.{i}", "attention_output": "gpt_neox.layers.{i}.attention",
                 "mlp_output": "gpt_neox.layers.{i}.mlp"},
    "gemma2": POST_NORMED_SITES, "gemma3": POST_NORMED_SITES, "olmo2": POST_NORMED_SITES,
}
# Weights drawn wider than the default 0.02, so the two prompts' metrics differ by whole logits, not by the
# thousandths a default tiny model gives, and a 1e-4 tolerance tells a wrong cell from a right one.
LOUD = dict(TINY_SHAPE, initializer_range=0.3)
FAMILY_CONFIGS = {
    "llama": LlamaConfig(**LOUD, num_key_value_heads=2),
    "gpt_neox": GPTNeoXConfig(**LOUD, use_parallel_residual=True, attention_bias=True),
    "gemma2": Gemma2Config(**LOUD, num_key_value_heads=2, head_dim=16, sliding_window=4,
                           final_logit_softcapping=3.0, attn_logit_softcapping=5.0),
    "gemma3": Gemma3TextConfig(**LOUD, num_key_value_heads=2, head_dim=16, sliding_window=3,
                               layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
    "olmo2": Olmo2Config(**LOUD, num_key_value_heads=2, attention_bias=True),
}


@pytest.fixture(scope="module", params=["gpt2", "llama", *FAMILY_CONFIGS])
def model_of_family(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "gpt2":
        return request.param, load_model(str(save_tiny_gpt2(folder, initializer_range=0.3)))
    return request.param, load_model(str(save_tiny_family_model(folder, FAMILY_CONFIGS[request.param])))


def main_tensor(output):
    return output if isinstance(output, torch.Tensor) else output[0]


def with_main_tensor(output, tensor):
    return tensor if isinstance(output, torch.Tensor) else (tensor, *output[1:])


def reference_grids(model, paths: dict[str, str], clean_ids, corrupted_ids, answer_id: int, wrong_id: int):
    """The metric for every (site, block, position), one full forward each, and the two baselines."""
    n_layers, seq = model.config.num_hidden_layers, corrupted_ids.shape[1]

    def metric(ids) -> float:
        logits = model(ids, use_cache=False).logits[0, -1]
        return float(logits[answer_id] - logits[wrong_id])

    clean_values, handles = {}, []

    def keep(key):
        def read(_module, _args, output):
            clean_values[key] = main_tensor(output)[0].clone()
        return read
    for site, path in paths.items():
        for layer in range(n_layers):
            handles.append(model.get_submodule(path.format(i=layer)).register_forward_hook(keep((site, layer))))
    with torch.no_grad():
        clean_metric = metric(clean_ids)
        for handle in handles:
            handle.remove()
        corrupted_metric = metric(corrupted_ids)
        grids = {site: np.zeros((n_layers, seq)) for site in paths}
        for site, path in paths.items():
            for layer in range(n_layers):
                for position in range(seq):
                    def patch(_module, _args, output, value=clean_values[(site, layer)][position]):
                        tensor = main_tensor(output).clone()
                        tensor[0, position] = value
                        return with_main_tensor(output, tensor)
                    handle = model.get_submodule(path.format(i=layer)).register_forward_hook(patch)
                    grids[site][layer, position] = metric(corrupted_ids)
                    handle.remove()
    return grids, clean_metric, corrupted_metric


@pytest.mark.parametrize("bos", [False, True])
def test_every_cell_matches_plain_hooks_on_the_full_model(model_of_family, bos):
    family, loaded = model_of_family
    patching = activation_patching(loaded, CLEAN, CORRUPTED, bos=bos, answer=ANSWER, wrong=WRONG)
    pair = patching.pair
    assert pair.corrupted.token_ids[0] == loaded.tokenizer.bos_token_id if bos else pair.corrupted.seq_len == 5
    grids, clean_metric, corrupted_metric = reference_grids(
        loaded.model, SITE_MODULES[family], torch.from_numpy(pair.clean.token_ids)[None],
        torch.from_numpy(pair.corrupted.token_ids)[None], pair.answer_id, pair.wrong_id)
    assert abs(clean_metric - corrupted_metric) > 0.1  # the pair differs: the grids are not one constant
    assert pair.clean_metric == pytest.approx(clean_metric, abs=1e-5)
    assert pair.corrupted_metric == pytest.approx(corrupted_metric, abs=1e-5)
    for site in PATCHED_SITES:
        np.testing.assert_allclose(patching.grids[site], grids[site], rtol=0, atol=1e-4, err_msg=site)
        assert np.ptp(grids[site]) > 0.01, site  # some patch moves the metric
    assert patching.complete


def test_patching_a_whole_block_output_gives_the_clean_run_and_nothing_the_corrupted(model_of_family):
    _, loaded = model_of_family
    patching = activation_patching(loaded, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    assert np.isfinite(patching.all_patched).all() and np.isfinite(patching.none_patched).all()
    assert patching.clean_check <= 1e-5
    assert patching.corrupted_check <= 1e-5
    last = patching.pair.corrupted.n_layers - 1
    assert patching.grids["layer_output"][last, -1] == pytest.approx(patching.pair.clean_metric, abs=1e-5)


def test_patches_that_change_nothing_read_the_corrupted_run_exactly(model_of_family):
    """Before the swapped token both runs hold the same values, and in the last block only the last position reaches
    the metric: those cells are the corrupted run, 0 on the tab's scale, not a recomputation of it."""
    _, loaded = model_of_family
    patching = activation_patching(loaded, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    pair = patching.pair
    swapped = int(np.flatnonzero(pair.clean.token_ids != pair.corrupted.token_ids)[0])
    assert swapped > 0
    for site in PATCHED_SITES:
        shares = patching.normalised(site)
        assert (shares[:, :swapped] == 0).all() and (shares[-1, :-1] == 0).all(), site
        assert (shares[:-1, swapped:] != 0).any(), site


def test_rows_stream_block_by_block_and_stop_when_closed(gpt2):
    pair = patching_pair(gpt2, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    blocks = patched_blocks(gpt2, pair)
    first = next(blocks)
    assert first.layer == 0 and set(first.metrics) == set(PATCHED_SITES)
    assert first.metrics["layer_output"].shape == (pair.corrupted.seq_len,)
    blocks.close()
    with pytest.raises(StopIteration):
        next(blocks)


def test_default_tokens_are_the_two_runs_top_predictions(model_of_family):
    _, loaded = model_of_family
    pair = patching_pair(loaded, CLEAN, CORRUPTED)
    clean_ranked = np.argsort(pair.clean.logits_at([-1])[0])[::-1]
    corrupted_ranked = np.argsort(pair.corrupted.logits_at([-1])[0])[::-1]
    assert pair.answer_id == clean_ranked[0]
    wrong = corrupted_ranked[1] if corrupted_ranked[0] == clean_ranked[0] else corrupted_ranked[0]
    assert pair.wrong_id == wrong != pair.answer_id


def test_prompts_of_unequal_length_are_refused_with_both_counts(gpt2):
    with pytest.raises(PromptError, match=r"clean prompt is 5 tokens and the corrupted prompt 9"):
        patching_pair(gpt2, CLEAN, "The capital of the United States of America is")


def test_a_corrupted_prompt_equal_to_the_clean_one_is_refused(gpt2):
    with pytest.raises(PromptError, match=r"the corrupted prompt is the clean prompt"):
        patching_pair(gpt2, CLEAN, CLEAN)


def cli(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "model_backend", "patch", *arguments], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("bos", [False, True])
def test_cli_writes_the_grids_as_float32_without_pickles(tiny_llama_dir, llama, tmp_path, bos):
    out = tmp_path / "patching.npz"
    result = cli("--model", str(tiny_llama_dir), "--clean", CLEAN, "--corrupted", CORRUPTED, "--answer", ANSWER,
                 "--wrong", WRONG, *(["--bos"] if bos else []), "--out", str(out))
    assert result.returncode == 0, result.stderr
    expected = activation_patching(llama, CLEAN, CORRUPTED, bos=bos, answer=ANSWER, wrong=WRONG)
    with np.load(out, allow_pickle=False) as archive:
        assert set(archive.files) == {"metadata", "patching.clean_tokens", "patching.corrupted_tokens",
                                      "patching.clean", "patching.corrupted", *(f"patching.{s}" for s in PATCHED_SITES)}
        assert archive["patching.clean"].shape == () and archive["patching.clean"].dtype == np.float32
        assert float(archive["patching.clean"]) == pytest.approx(expected.pair.clean_metric, abs=1e-6)
        assert float(archive["patching.corrupted"]) == pytest.approx(expected.pair.corrupted_metric, abs=1e-6)
        for site in PATCHED_SITES:
            grid = archive[f"patching.{site}"]
            assert grid.dtype == np.float32 and grid.shape == (llama.n_layers, expected.pair.clean.seq_len)
            np.testing.assert_array_equal(grid, expected.grids[site])
        assert list(archive["patching.corrupted_tokens"]) == expected.pair.corrupted.tokens
        metadata = json.loads(archive["metadata"][0])
    assert metadata["bos"] is bos and metadata["n_tokens"] == (6 if bos else 5)
    assert metadata["prompt"] == CLEAN and metadata["corrupted_prompt"] == CORRUPTED
    assert (metadata["answer"], metadata["wrong"]) == (ANSWER, WRONG) and metadata["dtype"] == "float32"


def test_cli_refuses_unequal_prompts_in_one_line(tiny_gpt2_dir, tmp_path):
    result = cli("--model", str(tiny_gpt2_dir), "--clean", CLEAN, "--corrupted", "The capital of the United States is",
                 "--out", str(tmp_path / "bad.npz"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("error: the clean prompt is 5 tokens and the corrupted prompt 7: patching needs "
                                     "as many tokens in both")


def test_the_corrupted_prompt_swaps_one_word():
    assert corrupted_version("The capital of France is") == "The capital of Italy is"
    assert corrupted_version("The capital of Italy is") == "The capital of France is"
    assert corrupted_version("Yesterday he went to the market") == "Yesterday she went to the market"
    assert corrupted_version("The Eiffel Tower stands in") == "The Eiffel Italy stands in"
    assert corrupted_version("nothing to swap here") == "nothing to swap here"


def test_the_patching_lesson_reads_the_grids(model_of_family):
    _, loaded = model_of_family
    patching = activation_patching(loaded, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    run = patching.pair.clean
    inputs = LessonInputs(run, None, ANSWER, 0.5, loaded.config.vocab_size, 0, patching=patching)
    text = lesson_text(7, inputs)
    pair = patching.pair
    assert f"= <b>{pair.clean_metric:.2f}</b>" in text and f"<b>{pair.corrupted_metric:.2f}</b>" in text
    assert "<code>␣Paris</code>" in text and "swapped token <code>␣France</code> (position 3)" in text
    stream = patching.normalised("layer_output")
    subject_blocks = np.flatnonzero(stream[:, 3] >= 0.5)
    assert (f"blocks <b>{subject_blocks[0]}" in text) if subject_blocks.size else "blocks <b>none</b>" in text
    assert ("textbook pattern:" in text) != ("not the clean hand-over" in text)
    unfinished = LessonInputs(run, None, ANSWER, 0.5, 10, 0, patching=None)
    assert f"0 of {run.n_layers} blocks so far" in lesson_text(7, unfinished)
