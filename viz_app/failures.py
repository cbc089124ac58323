"""What a page says when its computation fails: the backend's own words, or a kind of failure, never the raw text
of an unforeseen exception (it can hold paths); the server log has the details."""

from __future__ import annotations

import logging

import torch

from model_backend import BackendError

from .publishing import Publisher

log = logging.getLogger(__name__)


def failure_message(error: Exception) -> str:
    """The page's one line for a failed computation; the page stays usable either way."""
    if isinstance(error, BackendError):
        return str(error)
    if isinstance(error, (MemoryError, torch.OutOfMemoryError)):
        return "Out of memory: try a shorter prompt."
    return f"The computation failed ({type(error).__name__}); the server log has the details."


def report_failure(publisher: Publisher, error: Exception) -> None:
    """Show a failure on the page; the log gets a traceback only for failures the backend did not foresee."""
    if isinstance(error, BackendError):
        log.warning("request refused: %s", error)
    else:
        log.exception("request failed")
    publisher.update(message=failure_message(error))
