"""What every view needs from one run, and the pure analyses a session runs on a model thread."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model_backend import LoadedModel, Run, capture_token_ids, detect_sinks, direct_logit_attribution
from model_backend.targets import TargetMatch, match_target
from model_backend.tokens import encode_prompt, next_token_probabilities, token_strings, top_next_tokens

from .prompt_limits import check_page_token_limit


@dataclass(frozen=True)
class Analysis:
    """What every view needs from one run, computed together on a model thread (``run_batches.py``; the logit lens,
    the sweep and the attention pattern wait until their tab is shown: with a 50k vocabulary the lens costs more
    than the pass)."""

    run: Run
    sinks: object
    next_tokens: list  # the likeliest next tokens, (text, probability)
    target: TargetMatch  # the typed target matched after this prompt (the top prediction for an empty box)
    next_probabilities: np.ndarray  # [vocab]: what a target typed later is matched with, without the model

    @property
    def top_prediction(self) -> str:
        """The model's next token after the prompt: the default target."""
        return self.next_tokens[0][0]


def decoded(loaded: LoadedModel, token_ids: np.ndarray) -> np.ndarray:
    """Token ids decoded one by one (leading spaces kept), each distinct id decoded once."""
    unique, inverse = np.unique(token_ids, return_inverse=True)
    strings = np.array(token_strings(loaded, unique.tolist()), dtype=object)
    return strings[inverse].reshape(token_ids.shape)


def attribution_for(loaded: LoadedModel, run: Run, target_id: int | None, position: int):
    """The direct logit attribution of the followed target (the top prediction there when None)."""
    return direct_logit_attribution(loaded, run, target_id, position)


def page_run(loaded: LoadedModel, prompt: str, bos: bool) -> Run:
    """The prompt's run, if its tokens are within the page's limits (a PromptError says why not)."""
    token_ids = encode_prompt(loaded, prompt, bos=bos)
    check_page_token_limit(loaded, len(token_ids))
    return capture_token_ids(loaded, token_ids, prompt=prompt, bos=bos)


def analysis_of(loaded: LoadedModel, run: Run, typed_target: str = "", target_as_written: bool = False) -> Analysis:
    """What every view needs from a run just captured; a typed target that is not one token after this prompt
    leaves the views on the top prediction (``target_as_written``: an offered spelling, matched as written)."""
    probabilities = next_token_probabilities(run)
    return Analysis(run, detect_sinks(run), top_next_tokens(loaded, run, probabilities=probabilities),
                    match_target(loaded, run, typed_target, probabilities=probabilities, as_written=target_as_written),
                    probabilities)
