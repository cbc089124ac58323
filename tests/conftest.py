"""Shared fixtures: tiny random-init checkpoints on disk, loaded through the real loading code."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tiny_models import save_tiny_gpt2, save_tiny_llama  # noqa: E402

from model_backend import capture_run, load_model  # noqa: E402

PROMPT = "The capital of France is Paris, and the capital of Italy is"


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory) -> Path:
    return save_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def gpt2(tiny_gpt2_dir):
    return load_model(str(tiny_gpt2_dir))


@pytest.fixture(scope="session")
def llama(tiny_llama_dir):
    return load_model(str(tiny_llama_dir))


@pytest.fixture(scope="session", params=["gpt2", "llama"])
def loaded(request):
    """Each supported family's tiny model in turn."""
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="session")
def run(loaded):
    return capture_run(loaded, PROMPT, bos=True)
