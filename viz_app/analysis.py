"""What every view needs from one run, and the pure analyses a session runs on a model thread."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model_backend import LoadedModel, Run, capture_token_ids, direct_logit_attribution
from model_backend.tokens import encode_prompt, target_token_id, token_strings

from .prompt_limits import check_page_token_limit


@dataclass(frozen=True)
class Analysis:
    """What every view needs from one run, computed together on a model thread (``run_batches.py``; the logit lens,
    the sweep and the attention pattern wait until their tab is shown: with a 50k vocabulary the lens costs more
    than the pass)."""

    run: Run
    sinks: object
    next_tokens: list  # the likeliest next tokens, (text, probability)

    @property
    def top_prediction(self) -> str:
        """The model's next token after the prompt: the default target."""
        return self.next_tokens[0][0]


def decoded(loaded: LoadedModel, token_ids: np.ndarray) -> np.ndarray:
    """Token ids decoded one by one (leading spaces kept), each distinct id decoded once."""
    unique, inverse = np.unique(token_ids, return_inverse=True)
    strings = np.array(token_strings(loaded, unique.tolist()), dtype=object)
    return strings[inverse].reshape(token_ids.shape)


def attribution_for(loaded: LoadedModel, run: Run, target_text: str, position: int):
    """The direct logit attribution of a typed target (the top prediction when the box is empty)."""
    return direct_logit_attribution(loaded, run, target_token_id(loaded, target_text), position)


def page_run(loaded: LoadedModel, prompt: str, bos: bool) -> Run:
    """The prompt's run, if its tokens are within the page's limits (a PromptError says why not)."""
    token_ids = encode_prompt(loaded, prompt, bos=bos)
    check_page_token_limit(loaded, len(token_ids))
    return capture_token_ids(loaded, token_ids, prompt=prompt, bos=bos)

