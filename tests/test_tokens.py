"""GPT-2's own tokenization (shipped tokenizer files), BOS handling, prompts that cannot run, and token labels
that show a character split between tokens as its bytes in any script (GPT-2, SmolLM2, SentencePiece)."""

from __future__ import annotations

import pytest

from transformers import AutoTokenizer

from model_backend import PromptError, capture_run
from model_backend.model_names import SMOLLM2_COPY
from model_backend.package_index import prepared_folder
from model_backend.token_bytes import sequence_labels, token_bytes, token_labels
from model_backend.tokens import encode_prompt, sequence_strings, token_strings, visible_token
from test_targets import sentencepiece_tokenizer


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


NBSP = "\u00a0"
SCRIPTS = ["日本語", "🙂 ok", "Привет мир"]


@pytest.mark.parametrize("text", SCRIPTS)
def test_gpt2_byte_pieces_are_never_shown_as_replacement_characters(gpt2, text):
    """GPT-2 splits these characters into byte-level pieces that decode to U+FFFD on their own; the labels show
    each piece's bytes, naming the character the neighbouring pieces complete, and keep every whole character."""
    ids = encode_prompt(gpt2, text)
    assert any("\ufffd" in gpt2.tokenizer.decode([i]) for i in ids)  # the trap is real for these prompts
    labels = sequence_strings(gpt2, ids)
    assert not any("\ufffd" in label for label in labels + token_strings(gpt2, ids))
    assert b"".join(token_bytes(gpt2.tokenizer, ids)) == text.encode("utf-8")
    for character in text:
        assert character in "".join(labels).replace(f"{NBSP}of{NBSP}", "")


def test_split_characters_are_named_with_each_tokens_bytes(gpt2):
    ids = encode_prompt(gpt2, "日本")
    assert gpt2.tokenizer.convert_ids_to_tokens(ids) == ["æĹ", "¥", "æľ", "¬"]
    assert sequence_strings(gpt2, ids) == [f"⟨e6{NBSP}97{NBSP}of{NBSP}日⟩", f"⟨a5{NBSP}of{NBSP}日⟩",
                                           f"⟨e6{NBSP}9c{NBSP}of{NBSP}本⟩", f"⟨ac{NBSP}of{NBSP}本⟩"]
    assert token_strings(gpt2, ids) == [f"⟨e6{NBSP}97⟩", "⟨a5⟩", f"⟨e6{NBSP}9c⟩", "⟨ac⟩"]
    assert visible_token(" Привет\ufffd") == "␣Привет⟨U+FFFD⟩"
    ids = encode_prompt(gpt2, " Привет")
    assert sequence_strings(gpt2, ids)[0] == f" ⟨d0{NBSP}of{NBSP}П⟩"
    assert visible_token(sequence_strings(gpt2, ids)[0])[0] == "␣"


def test_run_tokens_and_lens_labels_of_a_japanese_prompt_hold_no_replacement_character(gpt2):
    run = capture_run(gpt2, "東京は日本の首都です 🙂", bos=True)
    assert run.tokens[0] == "<|endoftext|>" and not any("\ufffd" in token for token in run.tokens)
    every_token = token_strings(gpt2, list(range(gpt2.tokenizer.vocab_size)))
    assert sum("\ufffd" in label for label in every_token) == 8  # GPT-2 has 8 tokens that write U+FFFD itself,
    assert not any("\ufffd" in visible_token(label) for label in every_token)  # shown as its code point


def test_smollm2_tokenizer_labels_byte_pieces():
    folder = prepared_folder(SMOLLM2_COPY)
    if folder is None:
        pytest.skip("SmolLM2's prepared copy is not in the cache here")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    for text in SCRIPTS:
        ids = tokenizer.encode(text, add_special_tokens=False)
        pieces = token_bytes(tokenizer, ids)
        assert b"".join(pieces) == text.encode("utf-8")
        assert not any("\ufffd" in label for label in sequence_labels(pieces) + token_labels(pieces))
    assert sequence_labels(token_bytes(tokenizer, tokenizer.encode("<|im_start|>本", add_special_tokens=False))) == \
        ["<|im_start|>", "本"]


@pytest.mark.parametrize("prepend", [False, True])
def test_sentencepiece_byte_fallback_and_spaces(prepend):
    tokenizer = sentencepiece_tokenizer(prepend=prepend)
    ids = tokenizer.encode("The capital is London 日", add_special_tokens=False)
    labels = sequence_labels(token_bytes(tokenizer, ids))
    assert labels[-5:] == [" is", " London", " ", f"⟨e6{NBSP}of{NBSP}日⟩", f"⟨97{NBSP}of{NBSP}日⟩",
                           f"⟨a5{NBSP}of{NBSP}日⟩"][-5:]
    assert labels[-6] == " is"  # Llama 2's decoder strips a token's leading space; the label keeps it
