"""Which logit-lens positions a page reads next, and the part read ahead after a run, before the lens tab asks."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import numpy as np

from model_backend import Run

LENS_TOP_K = 5
LENS_FIRST_POSITIONS = 16
LENS_MARGIN_POSITIONS = 4
LENS_CHUNK_POSITIONS = 16
LENS_IDLE_POLL_SECONDS = 0.1



@dataclass(frozen=True)
class LensReadAhead:
    """The lens positions a new run's grid opens on, being read before the lens tab asks for them."""

    run: Run
    target_id: int | None
    raw: bool
    positions: np.ndarray
    part: asyncio.Task  # -> LogitLens, or None when the read gave way or failed
    asked_for: threading.Event  # set once the lens is asked for: the read then no longer gives way

    def belongs_to(self, run: Run, target_id: int | None, raw: bool) -> bool:
        return self.run is run and self.target_id == target_id and self.raw == raw


class GivesWay:
    """``keep_reading`` for a lens read nobody waits for yet: False, and remembered, once ``wanted_elsewhere``
    says the model threads are wanted for something else."""

    def __init__(self, wanted_elsewhere):
        self.wanted_elsewhere, self.gave_way = wanted_elsewhere, False

    def __call__(self) -> bool:
        self.gave_way = self.gave_way or self.wanted_elsewhere()
        return not self.gave_way


def unread_on_screen(unread: np.ndarray, window: tuple[int, int] | None) -> np.ndarray:
    """Unread positions the lens grid shows or nearly shows (its window and a margin each side; without a window,
    the last positions, where a run's grid opens), at most a chunk of them."""
    seq_len = len(unread)
    if window is None:
        start, end = max(seq_len - LENS_FIRST_POSITIONS, 0), seq_len
    else:
        start, end = max(window[0] - LENS_MARGIN_POSITIONS, 0), min(window[1] + LENS_MARGIN_POSITIONS + 1, seq_len)
    return (np.flatnonzero(unread[start:end]) + start)[-LENS_CHUNK_POSITIONS:]


def last_unread(unread: np.ndarray) -> np.ndarray:
    """The last chunk of unread positions: the grid fills leftwards from where it opens."""
    return np.flatnonzero(unread)[-LENS_CHUNK_POSITIONS:]
