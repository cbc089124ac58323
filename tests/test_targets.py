"""A typed target is matched the way the model would write the next token: after a word, "London" is " London"
(GPT-2's real tokenizer, SmolLM2's, and SentencePiece-style tokenizers with and without a prepended "▁")."""

from __future__ import annotations

import string

import pytest
from tokenizers import Tokenizer, decoders, models, normalizers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from model_backend import PromptError, capture_run
from model_backend.package_index import prepared_folder
from model_backend.model_names import SMOLLM2_COPY
from model_backend.targets import continuation_ids, match_target, next_token_text
from model_backend.tokens import next_token_probabilities

FRANCE = "The capital of France is"


@pytest.fixture(scope="module")
def france(gpt2):
    return capture_run(gpt2, FRANCE, bos=True)


def test_a_typed_word_after_a_word_is_the_spaced_token(gpt2, france):
    """GPT-2 writes " London" as one token (ĠLondon, 3576) and "London" as another (23421)."""
    match = match_target(gpt2, france, "London")
    assert match.followed.token_ids == (3576,) == tuple(gpt2.tokenizer.encode(" London"))
    assert match.followed.labels == (" London",) and not match.refused
    assert match.followed.probability == pytest.approx(next_token_probabilities(france)[3576], rel=1e-12)
    offered = {spelling.text: spelling.token_ids for spelling in match.others}
    assert offered == {"London": (23421,)}  # " london", "LONDON"... are several tokens each: not offered
    assert all(spelling.is_one_token for spelling in match.others)


def test_an_offered_spelling_is_followed_as_written_and_offers_the_spaced_one_back(gpt2, france):
    match = match_target(gpt2, france, "London", as_written=True)
    assert match.as_written and match.followed.token_ids == (23421,) and match.written.text == "London"
    assert {spelling.text: spelling.token_ids for spelling in match.others} == {" London": (3576,)}
    assert match.followed.probability == pytest.approx(next_token_probabilities(france)[23421], rel=1e-12)


def test_a_target_typed_with_its_space_or_after_a_space_is_taken_as_typed(gpt2, france):
    assert match_target(gpt2, france, " Paris").followed.token_ids == (6342,)
    assert next_token_text("The capital of France is ", "London") == "London"
    assert next_token_text("He said (", "London") == "London"
    assert next_token_text("It is Paris.", "London") == " London"
    assert next_token_text(FRANCE, ",") == ","


def test_a_word_of_several_tokens_is_named_and_the_views_keep_their_target(gpt2, france):
    match = match_target(gpt2, france, "Londonderry", fallback_id=6342)
    assert match.refused and match.written.labels == tuple(gpt2.tokenizer.decode([i]) for i in match.written.token_ids)
    assert len(match.written.token_ids) > 1 and match.token_id == 6342
    top = int(next_token_probabilities(france).argmax())
    assert match_target(gpt2, france, "Londonderry").token_id == top
    assert match_target(gpt2, france, "").token_id == top and match_target(gpt2, france, "").written is None


def test_a_split_character_in_a_refused_target_is_shown_as_its_bytes(gpt2, france):
    match = match_target(gpt2, france, "東京")
    assert match.refused and "\ufffd" not in "".join(match.written.labels)
    assert "".join(match.written.labels).count("of\u00a0東⟩") == len("東".encode())  # each byte a token
    with pytest.raises(PromptError, match="target holds a lone UTF-16 surrogate"):
        match_target(gpt2, france, "Lon\ud800")


def test_smollm2_writes_london_after_a_word_as_its_spaced_token():
    folder = prepared_folder(SMOLLM2_COPY)
    if folder is None:
        pytest.skip("SmolLM2's prepared copy is not in the cache here")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = continuation_ids(tokenizer, FRANCE, next_token_text(FRANCE, "London"))
    assert tokenizer.convert_ids_to_tokens(list(ids)) == ["ĠLondon"] and ids == (4528,)
    assert continuation_ids(tokenizer, FRANCE, "London") != ids


def sentencepiece_tokenizer(*, prepend: bool) -> PreTrainedTokenizerFast:
    """A small SentencePiece-style tokenizer with byte fallback: "▁" for a space, as Gemma's (``prepend=False``) or
    with a "▁" prepended to the text and stripped again on decoding, as Llama 2's."""
    pieces = [("<unk>", 0.0), *[(f"<0x{b:02X}>", -20.0) for b in range(256)],
              *[(word, -2.0) for word in ("▁London", "London", "▁The", "▁capital", "▁is", "▁")],
              *[(c, -5.0) for c in string.ascii_letters], *[("▁" + c, -6.0) for c in string.ascii_letters]]
    tokenizer = Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=True))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁")] * prepend + [normalizers.Replace(" ", "▁")])
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                           *[decoders.Strip(" ", 1, 0)] * prepend])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer)


@pytest.mark.parametrize("prepend", [False, True])
def test_sentencepiece_writes_london_after_a_word_as_its_spaced_piece(prepend):
    tokenizer = sentencepiece_tokenizer(prepend=prepend)
    prompt = "The capital is"
    ids = continuation_ids(tokenizer, prompt, next_token_text(prompt, "London"))
    assert tokenizer.convert_ids_to_tokens(list(ids)) == ["▁London"]
    assert tokenizer.convert_ids_to_tokens(list(continuation_ids(tokenizer, prompt, "London"))) != ["▁London"]


def test_the_target_box_says_what_is_followed_and_escapes_what_was_typed(gpt2, france):
    from layouts.target_box import probability_text, target_note

    assert [probability_text(p) for p in (0.75, 0.0041, 2.4e-05, 3e-9)] == ["75%", "0.41%", "0.0024%", "3.0e-09"]
    note = target_note(match_target(gpt2, france, "London"), france)
    assert "<code>␣London</code> (token 3576)" in note and "typed “London”, with the space a word has here" in note
    assert "Other spellings, one token each (click one to follow it)" in note
    refused = target_note(match_target(gpt2, france, "<b>x</b>y", fallback_id=3576), france)
    assert "“&lt;b&gt;x&lt;/b&gt;y” is not one token" in refused and "<b>x" not in refused
    assert "still follow <code>␣London</code> (token 3576)" in refused
    assert "the model's top prediction" in target_note(match_target(gpt2, france, ""), france)


def test_each_other_spelling_is_a_button_that_follows_it_as_written(gpt2, france):
    from layouts.state import ExplorerState
    from layouts.target_box import probability_text, spelling_buttons, target_note

    match = match_target(gpt2, france, "London")
    state = ExplorerState(run=france, target="London", target_match=match)
    offered = spelling_buttons(state)
    buttons = offered.objects
    london = next(s for s in match.others if s.text == "London")
    assert [button.label for button in buttons] == [
        f"London · token 23421 · p = {probability_text(london.probability)}"]
    buttons[0].clicks += 1
    assert (state.target, state.target_as_written) == ("London", "London")
    chosen = target_note(match_target(gpt2, france, "London", as_written=True), france)
    assert "<code>London</code> (token 23421)" in chosen and "typed “London”, as written." in chosen
    state.target_match = match_target(gpt2, france, "London")
    assert offered.objects[0] is buttons[0]  # the same spellings keep their buttons: the page is not laid out again
    state.target_match = match_target(gpt2, france, "")
    assert not offered.objects
