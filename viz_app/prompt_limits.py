"""How many tokens one page may run on a model: the model's own positions, capped for a server many pages share."""

from __future__ import annotations

from model_backend import LoadedModel, PromptError

PAGE_MAX_TOKENS = 2_048
# Per display name, a lower or higher cap than PAGE_MAX_TOKENS for this server's pages (the model's positions still
# bound it, through ``check_fits``).
PAGE_TOKEN_LIMITS: dict[str, int] = {}


def page_token_limit(loaded: LoadedModel) -> int:
    """The most tokens a page may run through ``loaded``."""
    return min(PAGE_TOKEN_LIMITS.get(loaded.display_name, PAGE_MAX_TOKENS), loaded.max_positions)


def check_page_token_limit(loaded: LoadedModel, n_tokens: int) -> None:
    """Refuse a tokenized prompt over the page's limit before its forward pass, naming the limit."""
    limit = page_token_limit(loaded)
    if n_tokens > limit:
        raise PromptError(f"the prompt is {n_tokens:,} tokens long; this page runs at most {limit:,} tokens through "
                          f"{loaded.display_name}: shorten it")
