"""A typed target matched to one token the way the model would write it next: after a prompt that ends in a word,
"London" means " London" (GPT-2's ``ĠLondon``, SentencePiece's ``▁London``), found through the tokenizer itself as
the tokens the word adds after the prompt. The lens, the attribution and the intervention all follow this token."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .tokens import check_no_surrogate, next_token_probabilities, sequence_strings, token_strings

# A prompt ending in one of these is followed by a space before a typed word; after an opening bracket, a quote,
# a dash or whitespace the word is written as typed.
WORD_ENDINGS = ".,;:!?)]}”’»%"


@dataclass(frozen=True)
class Spelling:
    """One way of writing a target after the prompt: its text, its tokens and their labels, and the probability of
    its first token as the next token."""

    text: str
    token_ids: tuple[int, ...]
    labels: tuple[str, ...]
    probability: float  # of token_ids[0] after the last position

    @property
    def is_one_token(self) -> bool:
        return len(self.token_ids) == 1


@dataclass(frozen=True)
class TargetMatch:
    """What a typed target became: the token every view follows, the typed text as the next token would write it
    (None for an empty box: the model's top prediction), other spellings that are one token each, and whether the
    text was taken as written (an offered spelling chosen), with no space put before it."""

    typed: str
    followed: Spelling
    written: Spelling | None
    others: tuple[Spelling, ...]
    as_written: bool = False

    @property
    def token_id(self) -> int:
        return self.followed.token_ids[0]

    @property
    def refused(self) -> bool:
        """The typed text is not one token, so the views follow another (the previous or the top prediction)."""
        return self.written is not None and not self.written.is_one_token


def next_token_text(prompt: str, typed: str) -> str:
    """``typed`` as it would be written right after ``prompt``: with a leading space when it starts with a letter
    or digit and the prompt ends in a word or a closing mark, else as typed."""
    ends_a_word = bool(prompt) and (prompt[-1].isalnum() or prompt[-1] in WORD_ENDINGS)
    return f" {typed}" if typed[:1].isalnum() and ends_a_word else typed


def continuation_ids(tokenizer, prompt: str, text: str) -> tuple[int, ...]:
    """The tokens ``text`` adds after ``prompt`` (encode both, keep what follows the prompt's own tokens); ``text``
    alone where the two merge across the join."""
    before = tokenizer.encode(prompt, add_special_tokens=False)
    after = tokenizer.encode(prompt + text, add_special_tokens=False)
    if after[:len(before)] == before and len(after) > len(before):
        return tuple(after[len(before):])
    return tuple(tokenizer.encode(text, add_special_tokens=False))


def spelling(loaded, prompt: str, text: str, probabilities: np.ndarray) -> Spelling:
    """``text`` written after ``prompt``: its tokens, their labels read together, its first token's probability."""
    ids = continuation_ids(loaded.tokenizer, prompt, text)
    return Spelling(text, ids, tuple(sequence_strings(loaded, list(ids))), float(probabilities[ids[0]]) if ids else 0.0)


def spelling_of_id(loaded, token_id: int, probabilities: np.ndarray) -> Spelling:
    """One token as a spelling (the top prediction, or the target kept when a typed one is refused)."""
    label = token_strings(loaded, [token_id])[0]
    return Spelling(label, (token_id,), (label,), float(probabilities[token_id]))


def other_spellings(prompt: str, typed: str) -> list[str]:
    """The typed word with and without its leading space, in lower, title and upper case."""
    word = typed.strip()
    cases = dict.fromkeys((word, word.lower(), word[:1].upper() + word[1:], word.upper()))
    return [text for case in cases for text in (f" {case}", case)]


def match_target(loaded, run, typed: str, fallback_id: int | None = None,
                 probabilities: np.ndarray | None = None, *, as_written: bool = False) -> TargetMatch:
    """Match the typed target after the run's prompt: one token is followed; several are named and the views keep
    ``fallback_id`` (default: the model's top prediction); an empty box follows the top prediction.
    ``probabilities``: the run's next-token probabilities, if already computed (else read from its logits);
    ``as_written``: the text is written after the prompt as it is (an offered spelling), no space put before it."""
    check_no_surrogate(typed, "target")
    probabilities = next_token_probabilities(run) if probabilities is None else probabilities
    top = int(probabilities.argmax())
    if not typed.strip():
        return TargetMatch(typed, spelling_of_id(loaded, top, probabilities), None, ())
    written = spelling(loaded, run.prompt, typed if as_written else next_token_text(run.prompt, typed), probabilities)
    others = [spelling(loaded, run.prompt, text, probabilities) for text in other_spellings(run.prompt, typed)
              if text != written.text]
    seen = {written.token_ids}
    offered = []
    for other in sorted(others, key=lambda s: -s.probability):
        if other.is_one_token and other.token_ids not in seen:
            seen.add(other.token_ids)
            offered.append(other)
    followed = written if written.is_one_token else spelling_of_id(
        loaded, top if fallback_id is None else fallback_id, probabilities)
    return TargetMatch(typed, followed, written, tuple(offered), as_written)
