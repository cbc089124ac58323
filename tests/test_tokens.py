"""GPT-2's own tokenization (shipped tokenizer files), BOS handling, and prompts that cannot run."""

from __future__ import annotations

import pytest

from model_backend import PromptError, capture_run
from model_backend.tokens import encode_prompt, visible_token


@pytest.mark.parametrize("text, ids", [(" Paris", [6342]), ("Paris", [40313]), ("<|endoftext|>", [50256]),
                                       ("Hello ", [15496, 220])])
def test_gpt2_tokenizer_facts(gpt2, text, ids):
    assert encode_prompt(gpt2, text) == ids


def test_bos_puts_endoftext_first(gpt2):
    run = capture_run(gpt2, "Hello world", bos=True)
    assert list(run.token_ids) == [50256, 15496, 995]
    assert run.tokens == ["<|endoftext|>", "Hello", " world"]


def test_empty_prompt_is_a_clear_error(gpt2):
    with pytest.raises(PromptError, match="empty"):
        capture_run(gpt2, "")


def test_prompt_longer_than_the_position_table_is_a_clear_error(gpt2):
    assert gpt2.max_positions == 64
    capture_run(gpt2, " a" * 64)
    with pytest.raises(PromptError, match="65 tokens long.*at most 64 positions"):
        capture_run(gpt2, " a" * 64, bos=True)


def test_visible_token_shows_whitespace():
    assert visible_token(" Paris") == "␣Paris"
    assert visible_token("\n\n") == "↵↵"
    assert visible_token("") == "∅"
