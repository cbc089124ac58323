"""Every view, and the whole page, in a Jupyter notebook: one call each, given a loaded model and/or a run.

Each view's state is filled before the call returns, through the same backend calls the page makes, so the view
shows data when its cell ends (also when a notebook is executed headless). A controller stays attached, so what
the view asks for later (another block, target or α, Scale each block) is computed as on the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import panel as pn

from layouts.attention_view import AttentionView
from layouts.attribution_view import AttributionView
from layouts.diagram_view import DiagramView
from layouts.intervention_view import InterventionView
from layouts.logit_lens_view import LogitLensView
from layouts.norms_view import NormsView
from layouts.patching_view import PatchingView
from layouts.similarity_view import SimilarityView
from layouts.state import ExplorerState
from layouts.writing_view import WritingView
from model_backend.attribution import direct_logit_attribution
from model_backend.branches import branch_seeds
from model_backend.capture import capture_run
from model_backend.generation import WriteSettings, generate_tokens
from model_backend.interventions import scaling_sweep
from model_backend.lens import logit_lens
from model_backend.norms import detect_sinks
from model_backend.loaded_model import LoadedModel
from model_backend.patching import pair_with_run, patching_of
from model_backend.run import Run
from model_backend.steering import Steering, steering_for
from model_backend.targets import TargetMatch, match_target
from model_backend.tokens import encode_prompt

from .models import ModelOutcome, shared_model
from .page import explorer_inline
from .analysis import decoded
from .lens_reading import LENS_TOP_K
from .session import ExplorerSession
from .writing import captured_texts, captured_writing, parting_choices, seed_labels

DEFAULT_ALPHA = ExplorerState.param.alpha.default


def controlled_state(loaded: LoadedModel | None, run: Run, layer: int = 0, token: int = 0, **choices) -> ExplorerState:
    """A state showing ``run`` with what the page computes after a pass, watched by a controller for ``loaded``."""
    return controlled_session(loaded, run, layer, token, **choices).state


def controlled_session(loaded: LoadedModel | None, run: Run, layer: int = 0, token: int = 0,
                       **choices) -> ExplorerSession:
    """The controller of ``controlled_state``: its Writer keeps a notebook's written branches."""
    if not 0 <= layer < run.n_layers:
        raise ValueError(f"layer {layer} is outside 0..{run.n_layers - 1}")
    if not 0 <= token < run.seq_len:
        raise ValueError(f"token {token} is outside 0..{run.seq_len - 1}")
    session = ExplorerSession([], ExplorerState(prompt=run.prompt, bos=run.bos, layer=layer, token=token, **choices))
    session.loaded = loaded
    session.state.param.update(family=None if loaded is None else loaded.family, run=run, sinks=detect_sinks(run))
    return session


def matched_target(loaded: LoadedModel, run: Run, target: str) -> TargetMatch:
    """``target`` matched after the run's prompt as the page matches it (empty: the top prediction); a notebook
    call fails at once on one that is not one token."""
    match = match_target(loaded, run, target)
    if match.refused:
        raise ValueError(f"the target {target!r} is {len(match.written.token_ids)} tokens after this prompt "
                         f"({', '.join(map(repr, match.written.labels))}); give one token, such as 'Paris'")
    return match


def following(state: ExplorerState, match: TargetMatch) -> ExplorerState:
    """The state following ``match``'s token (set before the results its views draw: a new target clears them)."""
    state.param.update(target_match=match, target_id=match.token_id)
    return state


def diagram_view(loaded: LoadedModel, run: Run, layer: int = 0, pinned: Sequence[str] = ("block.0",)) -> DiagramView:
    """The block diagram with block ``layer`` open and a card per pinned part (ids such as ``"attention.0"``)."""
    return DiagramView(controlled_state(loaded, run, layer, pinned=list(pinned)))


def norms_view(run: Run) -> NormsView:
    """The residual norm per position and boundary, with the attention sinks found and the signals that fired."""
    return NormsView(controlled_state(None, run))


def similarity_view(run: Run, layer: int = 0, token: int = 0) -> SimilarityView:
    """Cosine similarity: ``token`` across boundaries, the tokens at block ``layer``'s output, and every pair."""
    return SimilarityView(controlled_state(None, run, layer, token))


def logit_lens_view(loaded: LoadedModel, run: Run, target: str = "", raw: bool = False) -> LogitLensView:
    """Every boundary read through the final norm and unembedding (``raw``: without the norm), and ``target``'s
    probability and rank (an empty target: the model's top prediction)."""
    match = matched_target(loaded, run, target)
    state = following(controlled_state(loaded, run, target=target, raw_lens=raw), match)
    lens = logit_lens(loaded, run, k=LENS_TOP_K, target_id=match.token_id, raw=raw)
    state.param.update(lens=lens, lens_tokens=decoded(loaded, lens.top_ids))
    return LogitLensView(state)


def attribution_view(loaded: LoadedModel, run: Run, target: str = "", position: int = -1) -> AttributionView:
    """Each writer's (and head's) term in ``target``'s logit at ``position``, summing to the model's logit (an
    empty target: the model's top prediction; -1: the last position)."""
    if not -1 <= position < run.seq_len:
        raise ValueError(f"position {position} is outside -1..{run.seq_len - 1}")
    match = matched_target(loaded, run, target)
    state = following(controlled_state(loaded, run, target=target, attribution_position=position), match)
    state.attribution = direct_logit_attribution(loaded, run, match.token_id, position)
    return AttributionView(state)


def attention_view(run: Run, layer: int = 0) -> AttentionView:
    """Block ``layer``'s attention pattern per head, beside the share of attention each head gives the sink."""
    state = controlled_state(None, run, layer)
    state.param.update(pattern=run.attention_probabilities(layer), pattern_layer=layer)
    return AttentionView(state)


def intervention_view(loaded: LoadedModel, run: Run, target: str = "",
                      alpha: float = DEFAULT_ALPHA) -> InterventionView:
    """``target``'s log-probability at the last position when each block's output in turn is scaled by ``alpha``
    (an empty target: the model's top prediction)."""
    match = matched_target(loaded, run, target)
    state = following(controlled_state(loaded, run, target=target, alpha=alpha), match)
    state.sweep = scaling_sweep(loaded, run, match.token_id, alpha=alpha)
    return InterventionView(state)


def patching_view(loaded: LoadedModel, clean: Run | str, corrupted: str, answer: str = "", wrong: str = "", *,
                  bos: bool = False) -> PatchingView:
    """Activation patching of ``clean`` (a run, or a prompt run here with ``bos``) by the ``corrupted`` prompt: the
    logit difference ``answer`` - ``wrong`` (empty: the clean run's and the corrupted run's top predictions) with
    each block's output, attention and MLP write at each position taken from the clean run."""
    run = capture_run(loaded, clean, bos=bos) if isinstance(clean, str) else clean
    state = controlled_state(loaded, run, corrupted_prompt=corrupted, patch_answer=answer, patch_wrong=wrong)
    state.patching = patching_of(loaded, pair_with_run(loaded, run, corrupted, answer=answer or None,
                                                       wrong=wrong or None))
    return PatchingView(state)


def explorer(models: LoadedModel | str | Sequence[str]) -> pn.Row:
    """The whole page inline, on a loaded model or on model sources (Hub ids or folders, loaded here once per
    process). Its first run starts when the cell ends; then the prompt, Run, the model picker and every tab work
    as on the served page."""
    if isinstance(models, LoadedModel):
        outcomes = [ModelOutcome(models.source, models)]
    else:
        outcomes = [shared_model(source) for source in ([models] if isinstance(models, str) else models)]
    session = ExplorerSession([outcome.source for outcome in outcomes])
    session.outcomes = outcomes
    session.offer_loaded(None)  # the state's model watcher switches to it and runs the prompt
    return explorer_inline(session.state)


def flow_view(loaded: LoadedModel, run: Run, position: int = -1, threshold: float = 0.04, *, presenter: bool = False):
    """Information-flow routes into ``position`` (-1: the last): each head's, residual's and MLP's share of the
    stream it is added into, the edges at or below ``threshold`` hidden, with a slider and a position picker."""
    from layouts.flow_view import FlowView
    from model_backend.flow import information_flow
    return FlowView(information_flow(loaded, run), position=position, threshold=threshold, presenter=presenter)


def generation_view(loaded: LoadedModel, prompt: str, max_new_tokens: int = 16, *, bos: bool = True,
                    temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
                    seed: int = 0, branches: int = 1, steering: Steering | None = None) -> WritingView:
    """The Write tab's view of ``prompt``'s continuation, greedy (no ``temperature``) or sampled, written here by
    the page's decoder: ``branches`` texts (seed, seed + 1, …) with their parting step, steered by ``steering`` if
    given, the first one captured in one pass for its commitment strip. Its buttons write again, or continue a
    branch from an alternative, after the call."""
    settings = WriteSettings(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                             seed=seed)
    prompt_ids = encode_prompt(loaded, prompt, bos=bos)
    vector = None if steering is None else steering_for(loaded, steering, bos=bos)
    written = [generate_tokens(loaded, prompt_ids, replace(settings, seed=each), vector)
               for each in branch_seeds(settings, branches)]
    analysis, blocks = captured_writing(loaded, written[0], prompt, bos, "", False)
    labels = seed_labels(settings, branches)
    texts = captured_texts(loaded, written, labels, 0, blocks)
    sampled = {} if temperature is None else {"sample": True, "temperature": temperature,  # None: every token
                                              "top_k": len(loaded.tokenizer) if top_k is None else top_k,
                                              "top_p": 1.0 if top_p is None else top_p}
    steered = {} if steering is None else {"steer": True, "steer_block": steering.block,
                                           "steer_toward": steering.toward, "steer_away": steering.away,
                                           "steer_alpha": steering.alpha}
    session = controlled_session(loaded, analysis.run, max_new_tokens=max_new_tokens, seed=seed, branches=branches,
                                 **sampled, **steered)
    session.writer.adopt(written, labels)
    session.state.param.update(writing=texts[0], branch_texts=texts if branches > 1 else [], shown_branch=0,
                               **parting_choices(written))
    return WritingView(session.state)
