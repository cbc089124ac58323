"""The one state every view watches: the user's choices, and the results of the last run that the views draw."""

from __future__ import annotations

from dataclasses import dataclass

import param

from model_backend.tokens import SURROGATE

DEFAULT_PROMPT = "The capital of France is"


class UrlText(param.String):
    """Text kept in the URL. A browser can send a lone surrogate (half of an emoji), which a URL cannot hold: the
    URL shows U+FFFD in its place, and the run refuses the text itself with a message."""

    @classmethod
    def serialize(cls, value):
        return SURROGATE.sub("\ufffd", value)


@dataclass(frozen=True, eq=False)
class BranchAsk:
    """A click in the branches: every click is a new ask, even of the same branch or alternative."""

    show: int | None = None  # the branch to show in every tab
    step: int | None = None  # or the step of the shown branch to continue from, with ``token_id`` there
    token_id: int | None = None


class ExplorerState(param.Parameterized):
    """Choices (kept in the URL) and results (set by whoever runs the model: the app, or a notebook)."""

    model = param.Selector(default=None, objects=[], allow_None=True, check_on_set=False, label="model",
                           doc="source of the model in use (kept as typed in the URL until it is checked)")
    prompt = UrlText(default=DEFAULT_PROMPT)
    bos = param.Boolean(default=True, doc="prepend the model's BOS token")
    layer = param.Integer(default=0, bounds=(0, None), label="block",
                          doc="the open block, also the layer other views show")
    token = param.Integer(default=0, bounds=(0, None), label="token", doc="the position followed across layers")
    attention_head = param.Integer(default=None, allow_None=True, doc="the head the Attention tab opens on (a click "
                                                                     "on a flow edge); None: the mean over heads")
    pinned = param.List(default=[], item_type=str, doc="ids of the diagram parts whose cards are pinned")
    target = param.String(default="", doc="the target as typed, which the lens, the attribution and the "
                                         "intervention follow once matched to a token; a run fills an empty box "
                                         "with the model's own top prediction")
    target_as_written = param.String(default="", doc="an offered spelling chosen: while the target box holds "
                                                     "exactly this text, it is followed as written, no space put "
                                                     "before it")
    alpha = param.Number(default=0.8, bounds=(0.0, 2.0), step=0.05, doc="scale applied to one block's output")
    raw_lens = param.Boolean(default=False, doc="read blocks through lm_head without the final norm")
    lens_window = param.Range(default=None, doc="first and last position the lens grid shows; None: the last ones")
    attribution_position = param.Integer(default=-1, bounds=(-1, None), doc="the position attributed; -1: the last")

    corrupted_prompt = UrlText(default="", label="corrupted prompt",
                               doc="the Patching tab's corrupted prompt, as many tokens as the prompt; a run fills an "
                                   "empty box with the prompt with one word swapped")
    patch_answer = param.String(default="", label="answer token",
                                doc="the token patching credits; empty: the clean run's top prediction")
    patch_wrong = param.String(default="", label="wrong token",
                               doc="the token patching counts against; empty: the corrupted run's top prediction")
    compare = param.String(default="", doc="display name of the model whose norms the Norms tab shows under the "
                                           "run's, for the same prompt; empty: none (kept in the URL)")
    presenter = param.Boolean(default=False, doc="larger fonts and marks for a projector (kept in the URL)")
    shown_tab = param.String(default="", doc="title of the tab on screen; empty outside tabs (every view draws)")
    lesson = param.Integer(default=0, bounds=(0, 8), doc="the guided lesson's step on screen; 0: no lesson")

    max_new_tokens = param.Integer(default=16, label="new tokens",
                                   doc="how many tokens Write adds at most (1 to 128 on the page)")
    sample = param.Boolean(default=False, label="sample", doc="sample with temperature, top-k and top-p; off: greedy")
    temperature = param.Number(default=0.8, label="temperature", doc="divides the logits before sampling (above 0)")
    top_k = param.Integer(default=50, label="top-k", doc="sample among the k likeliest tokens (at least 1)")
    top_p = param.Number(default=1.0, label="top-p", doc="sample among the likeliest tokens whose probabilities "
                                                         "reach p, in (0, 1]")
    seed = param.Integer(default=0, label="seed", doc="the sampler's seed: the same seed writes the same text")
    branches = param.Integer(default=1, bounds=(1, 5), label="branches",
                             doc="texts written side by side, one seed each (seed, seed + 1, …)")
    branch_step = param.Integer(default=1, bounds=(1, None), label="branch at step",
                                doc="the written step whose alternatives can start a new branch")
    # The steering's defaults change SmolLM2's continuation of the France prompt and keep it fluent
    # (tests/test_smollm2_generation.py): " Paris." becomes " Rome."
    steer = param.Boolean(default=False, label="steer", doc="add α·(toward − away) to one block's input while writing")
    steer_block = param.Integer(default=10, label="steer block", doc="the block whose input the vector is added to")
    steer_toward = UrlText(default=" Italy", label="toward", doc="the text whose layer_input the vector points to")
    steer_away = UrlText(default=" France", label="away from", doc="the text whose layer_input the vector points from")
    steer_alpha = param.Number(default=1.0, label="α", doc="the steering vector's strength")
    write = param.Boolean(default=False, doc="a link's ask: write once its prompt has run (a link to a written text "
                                             "writes the same tokens again)")

    run_requested = param.Event(label="Run", doc="run the prompt")
    write_requested = param.Event(label="Write", doc="continue the prompt, one token at a time")
    stop_requested = param.Event(label="Stop", doc="stop writing, keeping what was written")
    lens_requested = param.Event(doc="read the logit lens of the run (asked by its view once shown)")
    attribution_requested = param.Event(doc="attribute the run's logit (asked by its view once shown)")
    pattern_requested = param.Event(doc="recompute block ``layer``'s attention pattern (asked by its view once shown)")
    sweep_requested = param.Event(label="Scale each block", doc="run the scaling intervention")
    patching_requested = param.Event(doc="patch the run with the corrupted prompt (asked by its view once shown)")
    flow_requested = param.Event(doc="trace the run's information flow (asked by its view once shown)")
    npz_requested = param.Event(label="Prepare the run's NPZ", doc="write the last run as NPZ for download")

    model_outcomes = param.List(default=[], doc="(name, loaded, origin or reason) for every configured model")
    family = param.Parameter(default=None, doc="the model's Family: module paths for the cards")
    bos_token = param.String(default="", doc="the model's own BOS token, which the BOS switch prepends")
    run = param.Parameter(default=None, doc="the last Run")
    sinks = param.Parameter(default=None, doc="SinkReport of the last run")
    lens = param.Parameter(default=None, doc="LogitLens of the last run")
    lens_tokens = param.Parameter(default=None, doc="the lens's top tokens decoded, [row, seq, k] str")
    pattern = param.Parameter(default=None, doc="attention pattern [heads, query, key] of block ``pattern_layer``")
    pattern_layer = param.Integer(default=None, allow_None=True, doc="the block ``pattern`` belongs to")
    sweep = param.Parameter(default=None, doc="ScalingSweep for the target, or None")
    target_match = param.Parameter(default=None, doc="TargetMatch: the typed target matched to a token after the "
                                                     "run's prompt, with its probability and other spellings")
    target_id = param.Integer(default=None, allow_None=True, doc="the one token the lens, the attribution and the "
                                                                 "intervention follow (target_match's)")
    patching = param.Parameter(default=None, doc="Patching of the run by the corrupted prompt, filled block by "
                                                 "block, or None")
    patching_note = param.String(default="", doc="why the Patching tab has no grids (prompts of unequal length…); "
                                                 "empty otherwise")
    attribution = param.Parameter(default=None, doc="LogitAttribution of the last run at attribution_position")
    compare_offered = param.List(default=[], item_type=str, doc="the models the Norms tab can compare with: every "
                                                                "loaded one but the one in use")
    comparison = param.Parameter(default=None, doc="ComparedRun: the compared model's run of the same prompt, or None")
    comparison_note = param.String(default="", doc="why the Norms tab shows no comparison (not offered, refused, "
                                                   "failed); empty otherwise")
    next_tokens = param.List(default=[], doc="the run's top next tokens after the prompt, as (text, probability)")
    stale = param.String(default="", doc="why the views still show the previous run (a refused or failed prompt); "
                                         "empty when they show the prompt in the box")
    status = param.String(default="", doc="model, token count and time of the last run")
    busy = param.String(default="", doc="what is being computed now; empty when idle")
    message = param.String(default="", doc="the last error, shown until the next success")
    npz_link = param.String(default="", doc="where the browser fetches the last run's NPZ; empty until prepared")
    npz_megabytes = param.Number(default=0.0, doc="the NPZ file's size")
    lesson_text = param.String(default="", doc="the lesson step's text (HTML) with the current run's numbers")
    highlight = param.Dict(default={}, doc="the lesson step's marks: figure name -> [{at, label}], from this run")
    flow = param.Parameter(default=None, doc="InformationFlow of the last run: every part's share of each whole")
    flow_note = param.String(default="", doc="why the Information flow tab has no graph (too long, not decomposed "
                                             "for this family, failed); empty otherwise")
    writing = param.Parameter(default=None, doc="WrittenText: the continuation being written or last written")
    branch_texts = param.List(default=[], doc="WrittenText of every branch, in the order written; empty when one "
                                              "text was written")
    shown_branch = param.Integer(default=0, doc="the branch ``writing`` is and every tab shows")
    branch_parting = param.Integer(default=None, allow_None=True, doc="the first step at which the seeded branches "
                                                                      "differ (0-based); None: they are all the same")
    branch_ask = param.Parameter(default=None, doc="a click's BranchAsk: continue the shown branch from a step with "
                                                   "an alternative, or show another branch in every tab")
    branched = param.List(default=[], doc="(branch continued, step, token id) of every branch continued from an "
                                          "alternative, in order: a link writes them again")
    write_check = param.String(default="", doc="the steering's check (α = 0 writes the plain text), as HTML")
    url_note = param.String(default="", doc="what of the page's link could not be used, and what is used instead")

    @param.depends("layer", "run", watch=True)
    def refuse_a_missing_block(self) -> None:
        """A block past the run's last is refused with a message, and the last block opened instead."""
        if self.run is not None and self.layer >= self.run.n_layers:
            last = self.run.n_layers - 1
            self.param.update(message=f"There is no block {self.layer}: this model has {self.run.n_layers} blocks, "
                                      f"0 to {last}; block {last} is open.", layer=last)

    def forget(self, *results: str) -> None:
        """Set these results back to their defaults and tell their views even where a result was empty already: a job
        cancelled before it published leaves nothing to change, and a view shown must still ask again."""
        with param.parameterized.discard_events(self):
            self.param.update(**{name: self.param[name].default for name in results})
        self.param.trigger(*results)
