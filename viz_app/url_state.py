"""The page's choices in its URL, read and written here rather than by Panel's ``location.sync``.

Panel's query parsing guesses types (``layer=²`` passes ``isdigit`` and then fails ``int``: see ``PageLocation``; a
prompt starting with ``{`` is parsed as JSON and dropped). Here each value is read with its own type, range and
length; a bad one falls back to its default, with a one-line note on the page.
"""

from __future__ import annotations

import json
import math
import re
from urllib.parse import urlencode

import panel as pn
from panel.io.location import Location

from layouts.diagram_parts import could_name_a_part
from layouts.state import ExplorerState, UrlText
from model_backend.tokens import PROMPT_MAX_BYTES
from viz_app.panel_internals import PageLocation

WRITE_KEYS = ("max_new_tokens", "sample", "temperature", "top_k", "top_p", "seed", "branches", "steer", "steer_block",
              "steer_toward", "steer_away", "steer_alpha")  # in a link only where they differ from the defaults
URL_KEYS = ("prompt", "model", "compare", "bos", "pinned", "layer", "token", "target", "target_as_written",
            "presenter", "lesson", "corrupted_prompt", "patch_answer", "patch_wrong", *WRITE_KEYS, "write",
            "branched")
LESSON_STEPS = ExplorerState.param.lesson.bounds[1]
BRANCHED_MAX = 16  # continued branches a link may ask for: each is a written text
PINNED_MAX = 32  # cards a link may pin: each is a panel of figures the server keeps for the page
POSITION_MAX = 1_000_000  # above any model's positions; clamped to the run's own once it is made
NAME_MAX_CHARACTERS = 200
LINK_PROMPT_MAX_CHARACTERS = 8_000  # Tornado refuses request lines over 64 kB, so a longer prompt stays out of links


class BadUrlValue(ValueError):
    """A URL value that cannot be used; its message is the note the page shows."""


def read_prompt(text: str) -> tuple[str, str]:
    if len(text.encode("utf-8", "surrogatepass")) > PROMPT_MAX_BYTES:
        raise BadUrlValue(f"the link's prompt is over {PROMPT_MAX_BYTES:,} bytes")
    return text, ""


def model_name_reader(what: str):
    """A reader of a model's display name as typed (``what`` names it in the note); the session, or the Norms tab's
    comparison, accepts it only if it names a model it offers."""
    def read(text: str) -> tuple[str, str]:
        if len(text) > NAME_MAX_CHARACTERS:
            raise BadUrlValue(f"the link's {what} is too long")
        return text, ""
    return read


def read_target(text: str) -> tuple[str, str]:
    """A target token as typed (empty: the model's top prediction); a run refuses one it cannot encode."""
    if len(text) > NAME_MAX_CHARACTERS:
        raise BadUrlValue("the link's target is too long")
    return text, ""


def read_switch(text: str, key: str) -> tuple[bool, str]:
    if text not in ("true", "false"):
        raise BadUrlValue(f"the link's {key} is {text[:20]!r}, not true or false")
    return text == "true", ""


def read_position(text: str, key: str) -> tuple[int, str]:
    if not (text.isascii() and text.isdigit() and int(text) <= POSITION_MAX):
        raise BadUrlValue(f"the link's {key} is {text[:20]!r}, not a number from 0 to {POSITION_MAX:,}")
    return int(text), ""


def read_lesson(text: str) -> tuple[int, str]:
    """A lesson step: 0 (no lesson) to ``LESSON_STEPS``."""
    if not (text.isascii() and text.isdigit() and int(text) <= LESSON_STEPS):
        raise BadUrlValue(f"the link's lesson is {text[:20]!r}, not a step from 0 to {LESSON_STEPS}")
    return int(text), ""


def read_pinned(text: str) -> tuple[list[str], str]:
    """Part ids as a JSON list, each kept once and only if it could name a part, at most ``PINNED_MAX``; the note
    says how many were left out."""
    try:
        listed = json.loads(text)
    except ValueError:
        listed = None
    if not isinstance(listed, list):
        raise BadUrlValue("the link's pinned cards are not a list")
    valid = [p for p in listed if isinstance(p, str) and could_name_a_part(p)]
    kept = list(dict.fromkeys(valid))[:PINNED_MAX]
    left_out = len(listed) - len(kept)
    return kept, (f"{left_out:,} of the link's {len(listed):,} pinned cards were repeats, unknown or over "
                  f"{PINNED_MAX}" if left_out else "")


def read_branches(text: str) -> tuple[int, str]:
    low, high = ExplorerState.param.branches.bounds
    if not (text.isascii() and text.isdigit() and low <= int(text) <= high):
        raise BadUrlValue(f"the link's branches is {text[:20]!r}, not a number from {low} to {high}")
    return int(text), ""


def read_branched(text: str) -> tuple[list[tuple[int, int, int]], str]:
    """Continued branches as a JSON list of [branch, step, token id], each a whole number from 0, at most
    ``BRANCHED_MAX``."""
    try:
        listed = json.loads(text)
    except ValueError:
        listed = None
    if not (isinstance(listed, list) and all(isinstance(item, list) and len(item) == 3
                                             and all(type(n) is int and 0 <= n <= POSITION_MAX for n in item)
                                             for item in listed)):
        raise BadUrlValue("the link's continued branches are not a list of [branch, step, token id]")
    kept = [tuple(item) for item in listed[:BRANCHED_MAX]]
    return kept, (f"the link asks for {len(listed)} continued branches; the first {BRANCHED_MAX} are written"
                  if len(listed) > BRANCHED_MAX else "")


def read_number(text: str, key: str) -> tuple[float, str]:
    """A finite number; whether it is in range is the Write tab's to say, with its message."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise BadUrlValue(f"the link's {key} is {text[:20]!r}, not a number")
    return value, ""


def read_whole_number(text: str, key: str) -> tuple[int, str]:
    if not re.fullmatch(r"-?[0-9]{1,9}", text):
        raise BadUrlValue(f"the link's {key} is {text[:20]!r}, not a whole number")
    return int(text), ""


READERS = {
    "prompt": read_prompt,
    "model": model_name_reader("model name"),
    "compare": model_name_reader("compared model name"),
    "bos": lambda text: read_switch(text, "bos"),
    "pinned": read_pinned,
    "layer": lambda text: read_position(text, "block"),
    "token": lambda text: read_position(text, "token"),
    "target": read_target,
    "target_as_written": read_target,
    "presenter": lambda text: read_switch(text, "presenter"),
    "lesson": read_lesson,
    "corrupted_prompt": read_prompt,
    "patch_answer": read_target,
    "patch_wrong": read_target,
    "max_new_tokens": lambda text: read_whole_number(text, "new tokens"),
    "sample": lambda text: read_switch(text, "sample"),
    "temperature": lambda text: read_number(text, "temperature"),
    "top_k": lambda text: read_whole_number(text, "top-k"),
    "top_p": lambda text: read_number(text, "top-p"),
    "seed": lambda text: read_whole_number(text, "seed"),
    "branches": read_branches,
    "steer": lambda text: read_switch(text, "steer"),
    "steer_block": lambda text: read_position(text, "steer block"),
    "steer_toward": read_target,
    "steer_away": read_target,
    "steer_alpha": lambda text: read_number(text, "α"),
    "write": lambda text: read_switch(text, "write"),
    "branched": read_branched,
}


def url_choices(arguments: dict[str, list[bytes]]) -> tuple[dict, list[str]]:
    """The state's choices in the URL's arguments (the last of repeated keys), and a note for each value left
    out (its default is used) or trimmed."""
    choices, notes = {}, []
    for key, reader in READERS.items():
        if not arguments.get(key):
            continue
        try:
            choices[key], note = reader(arguments[key][-1].decode("utf-8", "replace"))
        except BadUrlValue as bad:
            note = f"{bad}: its default is used"
        notes += [note] if note else []
    return choices, notes


def linked_prompt(state: ExplorerState) -> str:
    """The prompt a link opens with: the one of the run on screen, so an empty or refused prompt leaves the link
    as it was (a link to it would open a page with no run); the box's before the first run."""
    return state.run.prompt if state.run is not None else state.prompt


def url_query(state: ExplorerState) -> str:
    """The state's choices as a URL query, each in the form ``url_choices`` reads back; a prompt too long for a
    link is left out."""
    values = {
        "prompt": UrlText.serialize(linked_prompt(state)),
        "model": state.model,
        "compare": state.compare or None,
        "bos": "true" if state.bos else "false",
        "pinned": json.dumps(state.pinned),
        "layer": str(state.layer),
        "token": str(state.token),
        "target": UrlText.serialize(state.target),
        # an offered spelling chosen, kept only while the box holds it (a link then follows the same token)
        "target_as_written": (UrlText.serialize(state.target_as_written)
                              if state.target and state.target == state.target_as_written else None),
        "presenter": "true" if state.presenter else None,
        "lesson": str(state.lesson),
        "corrupted_prompt": UrlText.serialize(state.corrupted_prompt) or None,
        "patch_answer": UrlText.serialize(state.patch_answer) or None,
        "patch_wrong": UrlText.serialize(state.patch_wrong) or None,
    }
    values |= {key: write_value(state, key) for key in WRITE_KEYS}
    # a link to a written text writes it again once its prompt has run: the same settings write the same tokens
    values["write"] = "true" if state.writing is not None and state.writing.done else None
    values["branched"] = (json.dumps([list(item) for item in state.branched], separators=(",", ":"))
                          if values["write"] and state.branched else None)
    for long_text in ("prompt", "corrupted_prompt"):
        if len(values[long_text] or "") > LINK_PROMPT_MAX_CHARACTERS:
            del values[long_text]
    return "?" + urlencode({key: value for key, value in values.items() if value is not None})


def write_value(state: ExplorerState, key: str) -> str | None:
    """A write setting as the URL holds it, or None where it is the default."""
    value = getattr(state, key)
    if value == state.param[key].default:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return UrlText.serialize(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def keep_choices_in_url(state: ExplorerState) -> PageLocation:
    """Read the page's choices from its URL into ``state``, then write them back to the URL as they change; the
    Location returned is the one the page must be served with (``serve_page``), in place of Panel's own.
    """
    location = PageLocation.from_request(pn.state.curdoc.session_context.request)
    choices, notes = url_choices(pn.state.session_args)
    state.param.update(**choices, url_note="; ".join(notes))
    location.search = url_query(state)
    state.param.watch(lambda *_events: setattr(location, "search", url_query(state)),
                      [key for key in URL_KEYS if key not in ("presenter", "write")] + ["run", "writing"])
    state.param.watch(lambda *_events: reload_with(location, url_query(state)), "presenter")
    return location


def reload_with(location: Location, query: str) -> None:
    """Load the page again at ``query``: presenter mode sizes the page's text as the page is made."""
    location.reload = True
    location.search = query
