"""What the page says about each configured model: display names and kinds of failure, never a folder's path (the
server log has the whole reason)."""

from __future__ import annotations

from pathlib import Path

from .models import ModelOutcome


def source_label(source: str) -> str:
    """A configured source as the page names it: a folder by its own name, a Hub id as it is."""
    is_folder = source.startswith(("/", ".", "~")) or Path(source).expanduser().is_dir()
    return Path(source).name if is_folder else source


def shown_name(outcome: ModelOutcome) -> str:
    return outcome.name if outcome.loaded is not None else source_label(outcome.source)


def outcome_rows(outcomes: list[ModelOutcome]) -> list[tuple[str, bool, str]]:
    """(name, loaded, origin or kind of failure) per outcome, for the sidebar; a reason reads ``kind: details``."""
    return [(shown_name(o), o.loaded is not None, o.loaded.origin if o.loaded else o.reason.partition(":")[0])
            for o in outcomes]
