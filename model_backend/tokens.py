"""Turning a prompt into token ids, and token ids into strings whose spaces and newlines can be seen."""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

import numpy as np

from .errors import PromptError
from .token_bytes import sequence_labels, token_bytes, token_labels

if TYPE_CHECKING:  # loading imports transformers, which a page that only draws tokens need not wait for
    from .loaded_model import LoadedModel

SURROGATE = re.compile("[\ud800-\udfff]")
# The prompt box holds 200,000 UTF-16 code units, at most 3 bytes of UTF-8 each; a longer text is refused before the
# tokenizer reads it: a tokenizer's time and memory grow with the text, and a prompt megabytes long would hold a
# model thread and gigabytes of memory.
PROMPT_MAX_BYTES = 600_000
# Characters a label would hide or that would reorder the text around them: controls, format marks (RTL marks,
# zero-width joiners), surrogates, and the line and paragraph separators.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


class VisibleMarks(dict):
    """A ``str.translate`` table: whitespace as a mark, a hidden character as its code point, found on first use."""

    def __missing__(self, code_point: int) -> str:
        char = chr(code_point)
        self[code_point] = f"⟨U+{code_point:04X}⟩" if unicodedata.category(char) in HIDDEN_CATEGORIES else char
        return self[code_point]


# U+FFFD is what a decoder writes for bytes that are no text: shown as its code point, never as "�".
VISIBLE_MARKS = VisibleMarks({ord(" "): "␣", ord("\n"): "↵", ord("\t"): "⇥", ord("\r"): "␍",
                              0xFFFD: "⟨U+FFFD⟩"})


def encode_prompt(loaded: LoadedModel, prompt: str, *, bos: bool = False) -> list[int]:
    """Token ids for ``prompt``, with the model's BOS token first when asked; rejects what cannot run."""
    check_text(prompt)
    token_ids = loaded.tokenizer.encode(prompt, add_special_tokens=False)
    if bos:
        bos_id = loaded.tokenizer.bos_token_id
        if bos_id is None:
            raise PromptError(f"{loaded.display_name} has no BOS token to prepend")
        token_ids = [bos_id, *token_ids]
    return token_ids


def check_text(prompt: str) -> None:
    """Refuse a prompt with nothing to read, one over ``PROMPT_MAX_BYTES``, or with a surrogate code point, which
    no UTF-8 text can hold (a browser can send one: half of an emoji)."""
    n_bytes = len(prompt.encode("utf-8", "surrogatepass"))
    if n_bytes > PROMPT_MAX_BYTES:
        raise PromptError(f"the prompt is {n_bytes:,} bytes of UTF-8, over the limit of {PROMPT_MAX_BYTES:,}: "
                          "shorten it")
    if not prompt:
        raise PromptError("the prompt is empty: type some text to run")
    if prompt.isspace():
        raise PromptError("the prompt is only whitespace: type some text to run")
    check_no_surrogate(prompt, "prompt")


def check_no_surrogate(text: str, what: str) -> None:
    """Refuse text holding a lone surrogate, naming where it is (the message never holds the surrogate itself)."""
    surrogate = SURROGATE.search(text)
    if surrogate:
        raise PromptError(f"the {what} holds a lone UTF-16 surrogate, U+{ord(surrogate.group()):04X}, at character "
                          f"{surrogate.start() + 1} of {len(text)}: it is half of a character (such as an "
                          "emoji); delete it or paste the text again")


def top_prediction(loaded: LoadedModel, run, position: int = -1) -> str:
    """The token the model ranks first after ``position`` of a run (by default the next token), as its label."""
    return token_strings(loaded, [int(run.logits_at([position])[0].argmax())])[0]


def next_token_probabilities(run) -> np.ndarray:
    """The model's probability of every vocabulary token after the prompt, [vocab] float64."""
    logits = run.logits_at([-1])[0].astype(np.float64)
    probabilities = np.exp(logits - logits.max())
    return probabilities / probabilities.sum()


def top_next_tokens(loaded: LoadedModel, run, k: int = 5, probabilities: np.ndarray | None = None,
                    ) -> list[tuple[str, float]]:
    """The model's ``k`` likeliest next tokens after the prompt, as (text, probability), likeliest first
    (``probabilities``: the run's ``next_token_probabilities`` when already read, else read here)."""
    probabilities = next_token_probabilities(run) if probabilities is None else probabilities
    candidates = np.argpartition(probabilities, -k)[-k:] if k < len(probabilities) else np.arange(len(probabilities))
    top = candidates[np.argsort(probabilities[candidates], kind="stable")[::-1]]
    return list(zip(token_strings(loaded, top.tolist()), probabilities[top].tolist()))


def check_fits(loaded: LoadedModel, n_tokens: int) -> None:
    """Refuse a sequence the model has no positions for, before it fails deep inside (GPT-2's wpe lookup)."""
    if n_tokens == 0:
        raise PromptError("there are no tokens to run")
    if n_tokens > loaded.max_positions:
        raise PromptError(
            f"the prompt is {n_tokens} tokens long, but {loaded.display_name} reads at most "
            f"{loaded.max_positions} positions: shorten it"
        )


def token_strings(loaded: LoadedModel, token_ids: list[int]) -> list[str]:
    """Each token's label read on its own, the one source of every token shown apart from its neighbours (a lens
    cell, a prediction, a target): a word keeps its leading space (" Paris", not "Paris"), and a piece of a
    character shows its bytes (``⟨e6 97⟩``), never U+FFFD."""
    return token_labels(token_bytes(loaded.tokenizer, token_ids))


def sequence_strings(loaded: LoadedModel, token_ids: list[int]) -> list[str]:
    """The labels of a prompt's tokens, the one source of every axis, card, table and file that names a position:
    as ``token_strings``, but a character split between consecutive tokens is named beside each token's share of
    its bytes (``⟨e6 97 of 日⟩``, ``⟨a5 of 日⟩``)."""
    return sequence_labels(token_bytes(loaded.tokenizer, token_ids))


def visible_token(text: str) -> str:
    """A token with its whitespace and hidden characters drawn as visible marks (" Paris" -> "␣Paris",
    RTL override -> "⟨U+202E⟩"), so no label hides or reorders text; still needs HTML escaping."""
    return text.translate(VISIBLE_MARKS) or "∅"
