"""Turning a prompt into token ids, and token ids into strings whose spaces and newlines can be seen."""

from __future__ import annotations

from .errors import PromptError
from .loading import LoadedModel

VISIBLE_WHITESPACE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})


def encode_prompt(loaded: LoadedModel, prompt: str, *, bos: bool = False) -> list[int]:
    """Token ids for ``prompt``, with the model's BOS token first when asked; rejects what cannot run."""
    if not prompt:
        raise PromptError("the prompt is empty: type some text to run")
    token_ids = loaded.tokenizer.encode(prompt, add_special_tokens=False)
    if bos:
        bos_id = loaded.tokenizer.bos_token_id
        if bos_id is None:
            raise PromptError(f"{loaded.display_name} has no BOS token to prepend")
        token_ids = [bos_id, *token_ids]
    return token_ids


def check_fits(loaded: LoadedModel, n_tokens: int) -> None:
    """Refuse a sequence the model has no positions for, before it fails deep inside (GPT-2's wpe lookup)."""
    if n_tokens == 0:
        raise PromptError("there are no tokens to run")
    if n_tokens > loaded.max_positions:
        raise PromptError(
            f"the prompt is {n_tokens} tokens long, but {loaded.display_name} reads at most "
            f"{loaded.max_positions} positions"
        )


def token_strings(loaded: LoadedModel, token_ids: list[int]) -> list[str]:
    """Each token decoded on its own, so a word keeps its leading space (" Paris", not "Paris")."""
    return [loaded.tokenizer.decode([token_id]) for token_id in token_ids]


def visible_token(text: str) -> str:
    """A token with its whitespace drawn as visible marks (" Paris" -> "␣Paris"); still needs HTML escaping."""
    return text.translate(VISIBLE_WHITESPACE) or "∅"
