"""The NPZ export contract and the command line that writes it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from model_backend import capture_run, export, write_npz

RESIDUAL_KEYS = ("layer_input", "attention_output", "layer_mid", "mlp_output", "layer_output",
                 "attention_probabilities")


def expected_keys(n_layers: int, with_positions: bool) -> set[str]:
    keys = {"metadata", "token_ids", "tokens", "token_embeddings", "final_norm_output", "logits",
            "logit_lens.top_ids", "logit_lens.top_probs"}
    keys |= {f"layers.{i}.{name}" for i in range(n_layers) for name in RESIDUAL_KEYS}
    return keys | ({"position_embeddings"} if with_positions else set())


def test_npz_has_exactly_the_contract_keys(loaded, run, tmp_path):
    path = tmp_path / "run.npz"
    write_npz(loaded, run, path, k=4)
    with np.load(path, allow_pickle=False) as archive:
        assert set(archive.files) == expected_keys(loaded.n_layers, loaded.family.name == "GPT-2")
        assert archive["tokens"].dtype.kind == "U" and list(archive["tokens"]) == run.tokens
        assert archive["token_ids"].dtype.kind == "i"
        for key in archive.files:
            if key not in ("metadata", "tokens", "token_ids", "logit_lens.top_ids"):
                assert archive[key].dtype == np.float32, key
        np.testing.assert_array_equal(archive["layers.1.layer_mid"], run["layers.1.layer_mid"])
        np.testing.assert_array_equal(archive["logits"], run.logits)
        pattern = archive[f"layers.{loaded.n_layers - 1}.attention_probabilities"]
        assert pattern.shape == (loaded.n_heads, run.seq_len, run.seq_len)
        assert archive["logit_lens.top_ids"].shape == (loaded.n_layers + 1, run.seq_len, 4)
        np.testing.assert_array_equal(archive["logit_lens.top_ids"][-1, :, 0], run.logits.argmax(-1))
        metadata = json.loads(archive["metadata"][0])
    assert metadata["prompt"] == run.prompt and metadata["bos"] is True and metadata["n_tokens"] == run.seq_len
    assert metadata["source"] == loaded.source and metadata["dtype"] == "float32"
    assert metadata["device"] == "cpu" and metadata["revision"] is None
    assert metadata["packages"]["torch"] and metadata["packages"]["transformers"] and metadata["written"]


def test_logits_not_read_yet_are_written_a_few_positions_at_a_time(loaded, tmp_path, monkeypatch):
    """Never held whole: at a 262,144-token vocabulary a 2,048-token run's logits take 2 GB."""
    monkeypatch.setattr(export, "LOGITS_PER_MATMUL", 3 * loaded.config.vocab_size)  # three positions per block
    fresh = capture_run(loaded, "The capital of France is Paris, and", bos=True)
    write_npz(loaded, fresh, tmp_path / "run.npz", k=2)
    assert "logits" not in fresh.values
    with np.load(tmp_path / "run.npz", allow_pickle=False) as archive:
        written = archive["logits"]
    assert written.shape == (fresh.seq_len, loaded.config.vocab_size) and fresh.seq_len > 3
    np.testing.assert_allclose(written, fresh.logits, rtol=0, atol=1e-5)


def cli(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "model_backend", *arguments], capture_output=True, text=True,
                          timeout=300)


def test_cli_writes_the_export(tiny_gpt2_dir, gpt2, tmp_path):
    out = tmp_path / "cli.npz"
    result = cli("export", "--model", str(tiny_gpt2_dir), "--prompt", "Hello world", "--bos", "--out", str(out))
    assert result.returncode == 0, result.stderr
    with np.load(out, allow_pickle=False) as archive:
        assert list(archive["token_ids"]) == [50256, 15496, 995]
        np.testing.assert_array_equal(archive["logits"], capture_run(gpt2, "Hello world", bos=True).logits)


@pytest.mark.parametrize("arguments, message", [
    (("--prompt", ""), "empty"),
    (("--prompt", " a" * 65), "at most 64 positions"),
    (("--model", "no-such-org/no-such-model", "--prompt", "hi"), "not in the HF cache"),
])
def test_cli_bad_input_exits_with_one_line(tiny_gpt2_dir, tmp_path, arguments, message):
    if "--model" not in arguments:
        arguments = ("--model", str(tiny_gpt2_dir), *arguments)
    result = cli("export", *arguments, "--out", str(tmp_path / "bad.npz"))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
