"""Loading: local folders, typed failures that say what was tried, and GPT-2's attention flags."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from conftest import PROMPT
from hf_revisions import COMMITS, REPO_ID, write_two_revisions
from huggingface_hub import constants as hub_constants

from model_backend import (ModelNotCachedError, ModelNotFoundError, UnsupportedArchitectureError, capture_run,
                           load_model)
from model_backend.export import run_metadata
from page_driving.tiny_models import save_tiny_gpt2


def test_local_folder_loads_float32_eager_in_eval_mode(gpt2, tiny_gpt2_dir):
    assert gpt2.origin == "local folder"
    assert gpt2.display_name == tiny_gpt2_dir.name
    assert not gpt2.model.training
    assert gpt2.model.config._attn_implementation == "eager"
    assert all(p.dtype == torch.float32 for p in gpt2.model.parameters())


def test_unknown_hub_id_offline_says_it_is_not_cached():
    with pytest.raises(ModelNotCachedError, match="no-such-org/no-such-model.*HF cache"):
        load_model("no-such-org/no-such-model")


def test_missing_folder_is_not_found(tmp_path):
    with pytest.raises(ModelNotFoundError, match="no model folder"):
        load_model(str(tmp_path / "missing" / "model"))


def test_unsupported_architecture_lists_the_supported_ones(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertForMaskedLM"]}))
    with pytest.raises(UnsupportedArchitectureError, match="'bert'.*gemma2, gemma3_text, gpt2, gpt_neox, llama, "
                                                            "mistral, qwen2, olmo2, phi3, qwen3"):
        load_model(str(tmp_path))


def test_unknown_model_type_is_unsupported(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    with pytest.raises(UnsupportedArchitectureError):
        load_model(str(tmp_path))


def test_upcast_attention_checkpoint_loads_with_the_flag_off(tmp_path):
    folder = save_tiny_gpt2(tmp_path, reorder_and_upcast_attn=True, scale_attn_by_inverse_layer_idx=True)
    loaded = load_model(str(folder))
    assert loaded.config.reorder_and_upcast_attn is False
    run = capture_run(loaded, PROMPT)
    upcast = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    assert upcast.config.reorder_and_upcast_attn is True
    with torch.no_grad():
        upcast_logits = upcast(torch.from_numpy(run.token_ids)[None]).logits[0].numpy()
    np.testing.assert_allclose(run.logits, upcast_logits, atol=2e-5, rtol=0)
    assert run.attention_probabilities(2).shape[0] == loaded.n_heads


def write_hf_cache_entry(cache: Path, repo_id: str, checkpoint: Path) -> None:
    """Lay a checkpoint folder out as the HF cache stores a downloaded repository (refs/main -> a snapshot)."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    entry = cache / f"models--{repo_id.replace('/', '--')}"
    (entry / "refs").mkdir(parents=True)
    (entry / "refs" / "main").write_text(commit)
    shutil.copytree(checkpoint, entry / "snapshots" / commit)


def test_hub_id_loads_from_the_hf_cache_offline(tiny_gpt2_dir, tmp_path):
    write_hf_cache_entry(tmp_path / "hub", "tiny-org/tiny-gpt2", tiny_gpt2_dir)
    environment = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    script = ("from model_backend import load_model; m = load_model('tiny-org/tiny-gpt2'); "
              "print(m.origin, '|', m.display_name, '|', m.family.name)")
    result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "HF cache | tiny-org/tiny-gpt2 | GPT-2"


def test_bfloat16_compute_still_gives_float32_values_and_passes_the_probe(tiny_llama_dir):
    loaded = load_model(str(tiny_llama_dir), dtype="bfloat16")
    assert loaded.model.dtype == torch.bfloat16
    run = capture_run(loaded, "The capital of France is", bos=True)
    assert run["layers.1.layer_output"].dtype == np.float32 and run.logits.dtype == np.float32
    assert run.attention_probabilities(0).dtype == np.float32


def test_a_hub_id_names_its_revision_after_an_at_sign(monkeypatch):
    calls = []
    monkeypatch.setattr("model_backend.loading._load_from", lambda *args, **kwargs: calls.append((args, kwargs)))
    load_model("EleutherAI/pythia-160m@step1000")
    assert calls[0][0][:2] == ("EleutherAI/pythia-160m", "EleutherAI/pythia-160m")
    assert calls[0][1]["revision"] == "step1000"


def test_two_revisions_load_from_the_hf_cache_under_their_own_names(tmp_path, monkeypatch):
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(write_two_revisions(tmp_path / "hub")))
    main, step = load_model(REPO_ID), load_model(f"{REPO_ID}@step1000")
    assert (main.display_name, step.display_name) == (REPO_ID, f"{REPO_ID}@step1000")
    assert (main.commit, step.commit) == (COMMITS["main"], COMMITS["step1000"])
    assert not torch.equal(main.model.get_output_embeddings().weight, step.model.get_output_embeddings().weight)


def test_a_bfloat16_load_says_its_dtype_and_device_in_the_npz_metadata(tiny_llama_dir):
    loaded = load_model(str(tiny_llama_dir), dtype="bfloat16")
    metadata = run_metadata(loaded, capture_run(loaded, "The capital of France is"))
    assert loaded.compute == "bfloat16 on cpu"
    assert (metadata["dtype"], metadata["device"]) == ("bfloat16", "cpu")
