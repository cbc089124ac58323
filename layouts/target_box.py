"""The one target box the logit lens, the attribution and the intervention share: the typed text, and the token it
became shown as a token (its space visible, its id, its probability as the next token), other spellings that are
one token as buttons that follow them, and why a typed word that is several tokens is not followed."""

from __future__ import annotations

import html
from functools import partial

import panel as pn

from model_backend.tokens import visible_token

from .state import ExplorerState

# The same text as page_driving.locators.TARGET_BOX_PLACEHOLDER, which the browser tests find the boxes by.
TARGET_BOX_PLACEHOLDER = "a word, e.g. London (empty: top prediction)"


def shown_token(label: str) -> str:
    """A token label as code, its spaces and hidden characters visible, escaped."""
    return f"<code>{html.escape(visible_token(label))}</code>"


def probability_text(probability: float) -> str:
    """A probability as a percentage with two significant digits ("75%", "0.41%", "0.0024%"), in powers of ten
    below one in a million."""
    return f"{100 * probability:.2g}%" if probability >= 1e-6 else f"{probability:.1e}"


def followed_token(match, after: str) -> str:
    """The token followed, its id, and its probability as the next token."""
    followed = match.followed
    return (f"{shown_token(followed.labels[0])} (token {followed.token_ids[0]}) · p = "
            f"{probability_text(followed.probability)} {after}")


def target_note(match, run) -> str:
    """What the views follow and why, for the state's ``target_match`` (escaped: the typed text is user text)."""
    if match is None or run is None:
        return ""
    after = f"after {shown_token(run.tokens[-1])}"
    typed = html.escape(match.typed)
    if match.written is None:
        lines = [f"Following {followed_token(match, after)}: the model's top prediction. Type a word to follow "
                 "another token."]
    elif match.refused:
        pieces = " · ".join(shown_token(label) for label in match.written.labels)
        lines = [f"<b>“{typed}” is not one token</b>: {after} it is written as {len(match.written.token_ids)} "
                 f"tokens, {pieces}. A target must be one token, so the views still follow "
                 f"{followed_token(match, after)}."]
    else:
        how = (", as written" if match.as_written else
               ", with the space a word has here" if match.written.text != match.typed else "")
        lines = [f"Following {followed_token(match, after)} · typed “{typed}”{how}."]
    if match.others:
        lines.append("Other spellings, one token each (click one to follow it):")
    return "".join(f"<p class='target-note'>{line}</p>" for line in lines)


def spelling_label(other) -> str:
    """An offered spelling as a button says it: the token (space visible), its id and its probability (plain text:
    a button's label is never read as HTML)."""
    return f"{visible_token(other.labels[0])} · token {other.token_ids[0]} · p = {probability_text(other.probability)}"


def follow_spelling(state: ExplorerState, text: str, _event=None) -> None:
    """Follow an offered spelling: the box holds its text, taken as written (no space put before it)."""
    state.param.update(target_as_written=text, target=text)


def spelling_button(state: ExplorerState, label: str, text: str) -> pn.widgets.Button:
    button = pn.widgets.Button(label=label, color="primary", variant="outline", css_classes=["other-spelling"])
    button.on_click(partial(follow_spelling, state, text))
    return button


def spelling_buttons(state: ExplorerState) -> pn.FlexBox:
    """One button per other spelling of the typed word that is one token; a click follows it. The buttons are made
    again only when the spellings offered change: new widgets make the browser lay the whole page out again, which
    would lengthen every run (``benchmarks/page_benchmark.py``, Run -> drawn)."""
    buttons = pn.FlexBox(sizing_mode="stretch_width")
    shown = []

    def offer(*_events) -> None:
        match = state.target_match
        offered = [(spelling_label(other), other.text) for other in (match.others if match is not None else ())]
        if offered != shown:
            shown[:] = offered
            buttons.objects = [spelling_button(state, label, text) for label, text in offered]

    state.param.watch(offer, "target_match")
    offer()
    return buttons


def target_box(state: ExplorerState, width: int = 240):
    """The target's text box and, under it, the token it became and the other spellings to choose from: the same in
    every tab that follows a target."""
    box = pn.widgets.TextInput.from_param(state.param.target, width=width,
                                          placeholder=TARGET_BOX_PLACEHOLDER)
    note = pn.Column(pn.pane.HTML(pn.bind(target_note, state.param.target_match, state.param.run),
                                  sizing_mode="stretch_width", css_classes=["target-box"]),
                     spelling_buttons(state), sizing_mode="stretch_width")
    return box, note
