"""A fake HF cache holding two revisions of a tiny GPT-NeoX, as the Hub lays out Pythia's training checkpoints:
``refs/main`` and ``refs/step1000``, each naming a snapshot of different random weights."""

from __future__ import annotations

from pathlib import Path

from transformers import GPTNeoXConfig

from family_reference import TINY_SHAPE, save_tiny_family_model

REPO_ID = "tiny-org/tiny-pythia"
COMMITS = {"main": "1111111111111111111111111111111111111111", "step1000": "2222222222222222222222222222222222222222"}


def write_two_revisions(cache: Path) -> Path:
    """Write ``REPO_ID`` into the HF cache folder ``cache`` with one snapshot per revision; returns ``cache``."""
    entry = cache / f"models--{REPO_ID.replace('/', '--')}"
    (entry / "refs").mkdir(parents=True)
    for seed, (ref, commit) in enumerate(COMMITS.items(), start=5):
        (entry / "refs" / ref).write_text(commit)
        save_tiny_family_model(entry / "snapshots" / commit, GPTNeoXConfig(**TINY_SHAPE, attention_bias=True),
                               seed=seed)
    return cache
