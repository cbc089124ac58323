"""How many tokens one page may run on a model: the model's own positions, capped for a server many pages share."""

from __future__ import annotations

from model_backend import LoadedModel, PromptError
from model_backend.tokens import check_fits

PAGE_MAX_TOKENS = 2_048  # SmolLM2 reads 8,192 positions; a 2,048-token pass and its views stay within seconds


def check_page_token_limit(loaded: LoadedModel, n_tokens: int) -> None:
    """Refuse a tokenized prompt before its forward pass when the model has no positions for it, or when it is over
    the page's limit, naming the limit and where a longer prompt can still be read."""
    check_fits(loaded, n_tokens)
    if n_tokens > PAGE_MAX_TOKENS:
        raise PromptError(f"the prompt is {n_tokens:,} tokens long; this page runs at most {PAGE_MAX_TOKENS:,} tokens "
                          f"({loaded.display_name} reads up to {loaded.max_positions:,}): shorten it, or capture it "
                          "from Python or with `python -m model_backend export` (see the README)")
