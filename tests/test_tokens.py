"""GPT-2's own tokenization (shipped tokenizer files), BOS handling, and prompts that cannot run."""

from __future__ import annotations

import pytest

from model_backend import PromptError, capture_run
from model_backend.tokens import encode_prompt, target_token_id, visible_token


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


def test_whitespace_only_prompt_is_a_clear_error(gpt2):
    with pytest.raises(PromptError, match="only whitespace"):
        capture_run(gpt2, " \n\t\u3000\u00a0")
    assert capture_run(gpt2, " \n.").tokens == [" ", "\n", "."]


def test_lone_surrogate_is_named_with_its_position(gpt2):
    """A browser can send half of an emoji; UTF-8 cannot hold it, so the message names it without containing it."""
    with pytest.raises(PromptError, match=r"U\+D83D, at character 3 of 4") as refusal:
        encode_prompt(gpt2, "ab\ud83dc")
    str(refusal.value).encode("utf-8")


def test_prompt_longer_than_the_position_table_is_a_clear_error(gpt2):
    assert gpt2.max_positions == 64
    capture_run(gpt2, " a" * 64)
    with pytest.raises(PromptError, match="65 tokens long.*at most 64 positions"):
        capture_run(gpt2, " a" * 64, bos=True)
    with pytest.raises(PromptError, match="5000 tokens long, but .* reads at most 64 positions: shorten it"):
        capture_run(gpt2, " a" * 5000)


def test_visible_token_shows_whitespace():
    assert visible_token(" Paris") == "␣Paris"
    assert visible_token("\n\n") == "↵↵"
    assert visible_token("") == "∅"


def test_visible_token_shows_characters_that_hide_or_reorder_text():
    assert visible_token("a\u202eb\u200f") == "a⟨U+202E⟩b⟨U+200F⟩"
    assert visible_token("\x00\x1b\u2028") == "⟨U+0000⟩⟨U+001B⟩⟨U+2028⟩"
    assert visible_token("👩\u200d👧 é") == "👩⟨U+200D⟩👧␣é"


def test_target_is_its_first_token_and_refuses_a_lone_surrogate(gpt2):
    assert target_token_id(gpt2, " Paris") == 6342
    assert target_token_id(gpt2, "") is None
    with pytest.raises(PromptError, match=r"the target holds a lone UTF-16 surrogate, U\+DC00, at character 2 of 2"):
        target_token_id(gpt2, " \udc00")

