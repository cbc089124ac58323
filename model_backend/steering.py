"""Activation steering: one block's input shifted by alpha times the difference of two texts' streams.

The vector is ``layers.{B}.layer_input`` of the toward-text at its last position minus the away-text's, each
captured as a prompt is; ``steered_pass.py`` adds ``alpha * vector`` to block B's input at every position of a pass,
and other sessions' passes through the same model are never steered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .capture import capture_run
from .errors import PromptError
from .names import full_name
from .steered_pass import SteeringVector

if TYPE_CHECKING:
    from .loaded_model import LoadedModel


@dataclass(frozen=True)
class Steering:
    """What to steer with, as a user asks for it: the block whose input is shifted, the two texts, and alpha."""

    block: int
    toward: str
    away: str
    alpha: float

    def __post_init__(self):
        for side, text in (("toward", self.toward), ("away", self.away)):
            if not text or text.isspace():
                raise PromptError(f"the steering's {side} text is empty: type a word or phrase to steer {side}")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not math.isfinite(self.alpha):
            raise PromptError(f"the steering's alpha must be a finite number, not {self.alpha!r}")

    def check_block(self, loaded: LoadedModel) -> None:
        """Refuse a block the model does not have."""
        if isinstance(self.block, bool) or not isinstance(self.block, int) or not 0 <= self.block < loaded.n_layers:
            raise PromptError(f"the steering block must be one of 0..{loaded.n_layers - 1} "
                              f"({loaded.display_name} has {loaded.n_layers} blocks), not {self.block!r}")


def steering_vector(loaded: LoadedModel, steering: Steering, bos: bool) -> np.ndarray:
    """``layers.{B}.layer_input`` of the toward-text at its last position minus the away-text's [hidden], each text
    captured as a prompt is (with the model's BOS token first when ``bos``)."""
    steering.check_block(loaded)
    name = full_name("layer_input", steering.block)
    toward, away = (capture_run(loaded, text, bos=bos)[name][-1] for text in (steering.toward, steering.away))
    return (toward - away).astype(np.float32)


def steering_for(loaded: LoadedModel, steering: Steering, *, bos: bool = False) -> SteeringVector:
    """A steering made ready to apply: its vector computed on ``loaded``."""
    return SteeringVector(block=steering.block, alpha=float(steering.alpha),
                          vector=steering_vector(loaded, steering, bos), toward=steering.toward, away=steering.away)
