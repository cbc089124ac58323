"""The eight guided lessons' texts, each filled with the numbers of the run on screen (never canned ones).

Plain functions from a run's arrays and results to HTML: testable without a browser or a model. Every token is
made visible and HTML-escaped; a lesson whose effect the model does not show says so, and why.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from model_backend.names import FINAL_NORM_BIAS, full_name, parse_full_name
from model_backend.norms import ATTENTION_SHARE_THRESHOLD, NORM_RATIO_THRESHOLD, SinkReport, norm_ratios
from model_backend.run import Run
from model_backend.similarity import token_across_layers, tokens_within_layer
from model_backend.tokens import visible_token

from .cards import block_identity_error
from .patching_lesson import patching_lesson_paragraphs
from .writing_view import first_difference

if TYPE_CHECKING:  # these modules import torch; the lessons only read their results' arrays
    from model_backend.attribution import LogitAttribution
    from model_backend.interventions import ScalingSweep
    from model_backend.lens import LogitLens
    from model_backend.patching import Patching

    from .writing_view import WrittenText

LESSON_TITLES = ("The residual stream", "The attention sink", "Cosine similarity", "The logit lens",
                 "Logit attribution", "Scaling one block", "Activation patching", "Writing and steering")
IDENTITY_BLOCK = 3  # the block lesson 1 opens: early enough to exist in every model, late enough to be "a block"


@dataclass(frozen=True)
class LessonInputs:
    """What the lessons read: the run on screen and the results its views computed (None until they are)."""

    run: Run
    sinks: SinkReport | None
    prediction: str  # the model's top next token after the prompt
    prediction_probability: float
    vocabulary: int
    layer: int  # the open block
    other_bos_run: Run | None = None  # the same prompt with the BOS switch the other way
    other_bos_sinks: SinkReport | None = None
    lens: LogitLens | None = None
    target: str = ""
    attribution: LogitAttribution | None = None
    sweep: ScalingSweep | None = None
    patching: Patching | None = None
    writing: WrittenText | None = None


def shown(token: str) -> str:
    """A token as the lessons print it: whitespace visible, HTML escaped, in a code span."""
    return f"<code>{html.escape(visible_token(token))}</code>"


def paragraphs(*texts: str) -> str:
    return "".join(f"<p>{text}</p>" for text in texts if text)


def lead_and_more(lead: str, *more: str) -> str:
    """A step's text as one screen holds it: the sentence and number that matter, then the rest folded under
    "more" (a projector's large type fits three lines above the figure the step talks about)."""
    rest = paragraphs(*more)
    fold = f"<details class='lesson-more'><summary>more</summary>{rest}</details>" if rest else ""
    return f"<p class='lesson-lead'>{lead}</p>{fold}"


def residual_stream_lesson(inputs: LessonInputs) -> str:
    """Lesson 1: embeddings in, each block adding to the stream (the identity, measured), final norm, logits."""
    run, layer = inputs.run, inputs.layer
    hidden = run[full_name("layer_input", 0)].shape[-1]
    return lead_and_more(
        f"After the last token the model's top next token is {shown(inputs.prediction)} "
        f"(p = <b>{inputs.prediction_probability:.2f}</b>), read from the <i>residual stream</i>, which every "
        "block adds to and none replaces.",
        f"Each of the prompt's <b>{run.seq_len}</b> tokens enters as one vector of <b>{hidden}</b> numbers: its "
        f"embedding. That vector is the <i>residual stream</i>; it flows down through all <b>{run.n_layers}</b> "
        "blocks.",
        f"A block never replaces the stream: it reads it and <b>adds</b> its attention and MLP outputs. In block "
        f"<b>{layer}</b>, layer_input + attention_output + mlp_output equals layer_output (largest "
        f"difference <b>{block_identity_error(run, layer):.1e}</b>; the pinned card shows it for this run).",
        f"After block {run.n_layers - 1} the final norm rescales each vector and lm_head turns it into "
        f"<b>{inputs.vocabulary:,}</b> logits, one per token of the vocabulary.")


def holds_from(holds: np.ndarray) -> int | None:
    """The first index from which ``holds`` is true to the end; None if the last entry is false."""
    fails = np.flatnonzero(~holds)
    if not fails.size:
        return 0
    return None if fails[-1] == len(holds) - 1 else int(fails[-1] + 1)


def sink_sentence(run_bos: bool, run: Run | None, sinks: SinkReport | None) -> str:
    """What position 0 of one run shows: whether it is a sink, by which signals, and its numbers."""
    with_bos = "With BOS" if run_bos else "Without BOS"
    if sinks is None or run is None:
        return f"{with_bos}: this run could not be made (the message under the status line says why)."
    first = sinks.at(0)
    if first is None:
        return f"{with_bos}: the prompt has a single token, so no later token attends to it."
    numbers = (f"a norm <b>{first.norm_ratio:.1f}×</b> the others' median, <b>{first.attention_share:.0%}</b> of "
               f"the attention (at least {ATTENTION_SHARE_THRESHOLD:.0%} in <b>{first.layers_with_share}</b> of "
               f"{run.n_layers} blocks)")
    verdict = f"is a sink by its {', '.join(first.signals)}" if first.is_sink else "is no sink"
    return f"{with_bos}: position 0 ({shown(first.token)}) {verdict}: {numbers}."


def sink_details(run: Run, sinks: SinkReport | None) -> str:
    """What more position 0 of the run on screen shows: from which block a sink's norm stands out and what its value
    vector adds, or what a sink would need."""
    first = sinks.at(0) if sinks is not None else None
    if first is None:
        return ""
    if not first.is_sink:
        return (f"A sink's norm is at least {NORM_RATIO_THRESHOLD:.0f}× the others' median, or it gets "
                f"{ATTENTION_SHARE_THRESHOLD:.0%} of the attention in half the blocks.")
    since = holds_from(norm_ratios(sinks.residual_norms[1:])[:, 0] >= NORM_RATIO_THRESHOLD)
    since_text = (f"Its norm is at least {NORM_RATIO_THRESHOLD:.0f}× the others' from block <b>{since}</b> on."
                  if since is not None else "")
    value = (f" Its value vector is only <b>{first.value_ratio:.2f}×</b> the others', so all that attention adds "
             "little: the heads park attention there." if "value" in first.signals else "")
    return since_text + value


def sink_lesson(inputs: LessonInputs) -> str:
    """Lesson 2: norm, attention share and value norm at position 0, with and without BOS."""
    run = inputs.run
    this = sink_sentence(run.bos, run, inputs.sinks)
    other = sink_sentence(not run.bos, inputs.other_bos_run, inputs.other_bos_sinks)
    found = any(sinks is not None and sinks.sinks for sinks in (inputs.sinks, inputs.other_bos_sinks))
    why = ("A sink is a place where heads put the attention they do not need: a huge, nearly constant vector whose "
           "values add almost nothing." if found else
           "No sink here. A sink is learned: it forms during training (published work sees it after about a billion "
           "training tokens), so a model with little or no training shows none.")
    return lead_and_more(this, sink_details(run, inputs.sinks), other, why)


def cosine_lesson(inputs: LessonInputs) -> str:
    """Lesson 3: how the last token's vector drifts across the blocks, and how position 0 stands apart."""
    run, layer = inputs.run, inputs.layer
    last = run.seq_len - 1
    _, across = token_across_layers(run, last)
    steps = np.diagonal(across, offset=1)[1:-1]  # block i's output against block i+1's, final norm left out
    drift = (
        f"The last token, {shown(run.tokens[last])}: its embedding and block 0's output have a cosine similarity "
        f"of <b>{across[0, 1]:.2f}</b>, its embedding and the last block's output <b>{across[0, -2]:.2f}</b>. From "
        f"one block to the next it stays close (median <b>{np.median(steps):.2f}</b>): each block adds a small "
        "update to a large stream, and the updates add up.")
    if run.seq_len < 3:
        return lead_and_more(drift, "Position 0 needs at least two other tokens to compare with.")
    _, within = tokens_within_layer(run, full_name("layer_output", layer))
    others = within[1:, 1:][np.triu_indices(run.seq_len - 1, k=1)]
    first_with_others = within[0, 1:].mean()
    apart = (f"At block <b>{layer}</b>'s output position 0 ({shown(run.tokens[0])}) has a mean cosine of "
             f"<b>{first_with_others:.2f}</b> with the other tokens, against <b>{others.mean():.2f}</b> among them.")
    sink = inputs.sinks is not None and 0 in inputs.sinks.sink_positions
    why = ("Position 0 is the sink: its huge vector points its own way." if sink else
           "No sink here, so nothing sets position 0 apart beyond being first.")
    return lead_and_more(apart, why, drift)


def last_position_ranks(inputs: LessonInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """The target's rank and probability in every lens row at the last token; None until that column is read."""
    lens, last = inputs.lens, inputs.run.seq_len - 1
    if lens is None or lens.target_ranks is None or last not in lens.positions:
        return None
    column = int(np.flatnonzero(lens.positions == last)[0])
    return lens.target_ranks[:, column], lens.target_probs[:, column]


def lens_lesson(inputs: LessonInputs) -> str:
    """Lesson 4: each block read through the final norm and unembedding, the last row exactly the logits, and the
    block where the target first comes out on top."""
    lens, read = inputs.lens, last_position_ranks(inputs)
    if read is None:
        return paragraphs("Reading the logit lens…")
    ranks, probabilities = read
    target = shown(inputs.target)
    reading = ("Each row reads the stream after one block through the model's own final norm and lm_head, as if "
               f"the model stopped there. The last row <i>is</i> the model's output: it matches the logits to "
               f"<b>{lens.last_row_max_abs_diff:.1e}</b>.")
    on_top = np.flatnonzero(ranks == 1)
    if not on_top.size:
        found = (f"At the last token {target} never comes out on top; in the last row it ranks "
                 f"<b>{ranks[-1]}</b> (p = <b>{probabilities[-1]:.3f}</b>).")
    else:
        stays = holds_from(ranks == 1)
        found = (f"At the last token {target} first comes out on top at <b>{row_name(on_top[0])}</b> "
                 f"(p = <b>{probabilities[on_top[0]]:.2f}</b>)"
                 + stays_text(on_top[0], stays)
                 + (f"; the output ranks it <b>{ranks[-1]}</b> with" if ranks[-1] > 1 else "; the output gives it")
                 + f" p = <b>{probabilities[-1]:.2f}</b>.")
    return lead_and_more(found, reading)


def stays_text(first: int, stays: int | None) -> str:
    """Whether the target, once on top at lens row ``first``, stays there to the output, and from which row."""
    if stays is None:
        return ", then loses the top place"
    return " and stays there" if stays == first else f" and stays there from <b>{row_name(stays)}</b> on"


def row_name(row: int) -> str:
    """A lens row in words: row 0 is the embeddings, row r block r-1's output."""
    return "the embeddings" if row == 0 else f"block {row - 1}"


def writer_name(label: str) -> str:
    """An attribution label in words: ``layers.3.mlp_output`` -> "block 3's MLP"."""
    if label == FINAL_NORM_BIAS:
        return "the final norm's bias"
    value, layer, part = parse_full_name(label)
    if layer is None or value.name == "layer_input":
        return label.replace("_", " ") if layer is None else "the token embeddings"
    if part and part.startswith("head_"):
        return f"block {layer} head {part[5:]}"
    return f"block {layer}'s {'attention' if value.name == 'attention_output' else 'MLP'}"


def attribution_lesson(inputs: LessonInputs) -> str:
    """Lesson 5: which blocks and heads write the target's logit, and that the bars sum to it."""
    attribution = inputs.attribution
    if attribution is None:
        return paragraphs("Attributing the logit…")
    labels, terms = attribution.bars()
    order = np.argsort(terms)  # the largest three are the ones lesson 5 highlights
    largest = ", ".join(f"{writer_name(labels[i])} (<b>{terms[i]:+.2f}</b>)" for i in order[::-1][:3])
    layer, head = np.unravel_index(np.argmax(attribution.head_contributions), attribution.head_contributions.shape)
    total = float(terms.sum())
    return lead_and_more(
        f"The logit of {shown(attribution.target_token)} after the last token is <b>{attribution.logit:.3f}</b>; "
        f"the largest bars: {largest}.",
        "With the final norm's scale frozen at this run's value the readout is linear, so the logit splits into one "
        "bar per part that writes to the stream.",
        f"The most negative: {writer_name(labels[order[0]])} "
        f"(<b>{terms[order[0]]:+.2f}</b>). The strongest head is block {layer} head {head} "
        f"(<b>{attribution.head_contributions[layer, head]:+.2f}</b>).",
        f"The bars sum to <b>{total:.4f}</b>, the model's logit is <b>{attribution.logit:.4f}</b>: a difference of "
        f"<b>{abs(total - attribution.logit):.1e}</b>.")


def scaling_changes(sweep: ScalingSweep, n_layers: int) -> tuple[np.ndarray, int]:
    """Each block's change of the target's log-probability when scaled, and the block (last left out) that moves
    it most."""
    changes = sweep.scaled_logprobs - sweep.clean_logprob
    return changes, int(np.argmax(np.abs(changes[:-1]))) if n_layers > 1 else 0


def intervention_lesson(inputs: LessonInputs) -> str:
    """Lesson 6: the target's log-probability with each block's output scaled, and why the last block's scale
    changes nothing."""
    sweep, run = inputs.sweep, inputs.run
    if sweep is None or len(sweep.scaled_logprobs) < run.n_layers:
        done = 0 if sweep is None else len(sweep.scaled_logprobs)
        return paragraphs(f"Scaling each block in turn… {done} of {run.n_layers} blocks so far.")
    changes, most = scaling_changes(sweep, run.n_layers)
    target = shown(inputs.target)
    return lead_and_more(
        f"Scaling block <b>{most}</b> moves it most: log p({target}) goes from <b>{sweep.clean_logprob:.3f}</b> to "
        f"<b>{sweep.scaled_logprobs[most]:.3f}</b> (<b>{changes[most]:+.3f}</b>); the last block's scale changes "
        f"it by only <b>{changes[-1]:+.1e}</b>.",
        f"Each point reruns the prompt with one block's output multiplied by <b>{sweep.alpha:g}</b>. With nothing "
        f"scaled, log p({target}) = <b>{sweep.clean_logprob:.3f}</b>.",
        f"Scaling the last block, {run.n_layers - 1}, changes it by only <b>{changes[-1]:+.1e}</b>. Its output "
        "is the whole stream, and the final norm divides its input by the input's own size (RMS or standard "
        "deviation), so a uniform scale cancels, up to the norm's epsilon.")


def patching_lesson(inputs: LessonInputs) -> str:
    """Lesson 7: where the answer is carried, block by block and token by token (``patching_lesson``)."""
    return lead_and_more(*patching_lesson_paragraphs(inputs.patching, inputs.run.n_layers, shown))


def earliest_decided(writing: WrittenText) -> int | None:
    """The written token the logit lens puts on top at the earliest block, or None when only the readout does."""
    blocks = writing.commitment or []
    decided = [index for index, block in enumerate(blocks) if block >= 0]
    return min(decided, key=lambda index: (blocks[index], index)) if decided else None


def steering_sentences(writing: WrittenText) -> tuple[str, str]:
    """Where the steered continuation parts from the plain one (or that it does not), and the plain text."""
    plain = f"Without the steering it writes <b>{html.escape(''.join(writing.plain))}</b>."
    differs = first_difference(writing.tokens, writing.plain)
    if differs is None:
        return (f"Steered ({html.escape(writing.steering)}) it writes the same as without: the vector is too weak "
                "at this block for this model (try a larger α or another block).", plain)
    return f"Steered, it parts from the plain continuation at written token <b>{differs + 1}</b>.", plain


def writing_lesson(inputs: LessonInputs) -> str:
    """Lesson 8: the continuation written one cached pass per token, where the steering turned it, and the block at
    which each written token was decided (the commitment strip)."""
    writing, n_layers = inputs.writing, inputs.run.n_layers
    if writing is None or not writing.done:
        so_far = 0 if writing is None else len(writing.tokens)
        return paragraphs(f"Writing… {so_far} tokens so far, one pass against the key/value cache each.")
    n = len(writing.tokens)
    blocks = writing.commitment or []
    decided = sum(block >= 0 for block in blocks)
    earliest = earliest_decided(writing)
    turned, plain = steering_sentences(writing) if writing.plain is not None else ("", "")
    commitment = (f"<b>{decided}</b> of the {n} written tokens are on top of the logit lens before the last block; "
                  f"the earliest, {shown(writing.tokens[earliest])}, from block <b>{blocks[earliest]}</b> of "
                  f"{n_layers}; the other {n - decided} only in the model's final readout." if earliest is not None
                  else f"None of the {n} written tokens is on top of the logit lens before the final readout: "
                       "this model decides each word only at its last block.")
    return lead_and_more(
        f"It wrote <b>{n} tokens</b>, one pass each. {turned}",
        f"It wrote <b>{html.escape(''.join(writing.tokens))}</b> ({html.escape(writing.steering or 'not steered')}). "
        f"{plain}",
        "Each step runs only the newest token, its keys and values joining the cache, and takes the likeliest "
        "next token (greedy) or draws one (sample, from the seed shown). Steering adds α·(toward − away) to one "
        "block's input at every position, the two texts' <code>layer_input</code> at their last position; at "
        "α = 0 it writes exactly the plain text (the check under the text).",
        "The strip colours each written token by the first block whose logit lens puts it on top: " + commitment)


LESSONS = (residual_stream_lesson, sink_lesson, cosine_lesson, lens_lesson, attribution_lesson, intervention_lesson,
           patching_lesson, writing_lesson)


def lesson_text(step: int, inputs: LessonInputs) -> str:
    """The HTML of lesson ``step`` (1 to 8) for this run."""
    return LESSONS[step - 1](inputs)
