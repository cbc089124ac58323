"""Models shared by every session of this server process: each source is tried once, and kept or its failure
reason remembered, so a second browser tab neither reloads the weights nor waits for the Hub probe again."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import torch

from model_backend import (LoadedModel, ModelNotCachedError, ModelNotFoundError, ModelPreparationError,
                           UnsupportedArchitectureError, load_model)
from viz_app.settings import configured_compute

log = logging.getLogger(__name__)

FAILURE_KINDS = (
    (ModelNotCachedError, "not cached"),
    (ModelNotFoundError, "not found"),
    (ModelPreparationError, "not prepared"),
    (UnsupportedArchitectureError, "unsupported architecture"),
    (MemoryError, "out of memory"),
    (torch.OutOfMemoryError, "out of memory"),
)


@dataclass(frozen=True)
class ModelOutcome:
    """A configured source and what loading it gave: the model, or why there is none."""

    source: str
    loaded: LoadedModel | None
    reason: str = ""

    @property
    def name(self) -> str:
        return self.loaded.display_name if self.loaded is not None else self.source


_outcomes: dict[str, ModelOutcome] = {}
_loading = threading.Lock()
_progress: dict[str, str] = {}


def shared_model(source: str) -> ModelOutcome:
    """The process-wide outcome of loading ``source``; the first caller loads, the others wait and share it."""
    with _loading:
        if source not in _outcomes:
            _outcomes[source] = _attempt(source)
        return _outcomes[source]


def loading_progress(source: str) -> str:
    """What the load of ``source`` is doing now (downloading, dequantizing, saving), or empty if it says nothing."""
    return _progress.get(source, "")


def _note_progress(source: str, message: str) -> None:
    """Keep the latest step of a load for every page that waits on it, and put it in the server log."""
    _progress[source] = message
    log.info("%s: %s", source, message)


def _attempt(source: str) -> ModelOutcome:
    """Load a model, turning every failure into a reason a page can show (never an exception)."""
    try:
        return ModelOutcome(source, load_model(source, progress=lambda message: _note_progress(source, message),
                                               **configured_compute()))
    except Exception as error:  # noqa: BLE001 - a bad model must never take the page down
        kind = next((label for error_type, label in FAILURE_KINDS if isinstance(error, error_type)), "failed")
        log.warning("model %s not loaded (%s): %s", source, kind, error)
        return ModelOutcome(source, None, f"{kind}: {error}")
