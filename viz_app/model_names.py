"""What the page says about each configured model: display names and kinds of failure, never a folder's path (the
server log has the whole reason)."""

from __future__ import annotations

import re
from pathlib import Path

from .models import ModelOutcome


FILE_PATH = re.compile(r"(?<![\w.:/])[~/][^\s'\"(),;]+")


def without_paths(reason: str) -> str:
    """A failure's words with each file path cut to its last part: the page says why, the server log says where."""
    return FILE_PATH.sub(lambda path: "…/" + Path(path.group()).name, reason)


def source_label(source: str) -> str:
    """A configured source as the page names it: a folder by its own name, a Hub id as it is."""
    is_folder = source.startswith(("/", ".", "~")) or Path(source).expanduser().is_dir()
    return Path(source).name if is_folder else source


def shown_name(outcome: ModelOutcome) -> str:
    return outcome.name if outcome.loaded is not None else source_label(outcome.source)


def outcome_rows(outcomes: list[ModelOutcome]) -> list[tuple[str, bool, str]]:
    """(name, loaded, origin or why it is not offered) per outcome, for the sidebar, without the server's paths."""
    return [(shown_name(o), o.loaded is not None, o.loaded.origin if o.loaded else without_paths(o.reason))
            for o in outcomes]
