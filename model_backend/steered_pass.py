"""A pass steered: ``alpha * vector`` added to one block's input at every position, through a hook that acts only in
the thread that runs the pass (``hooks.py``) and lives only as long as that pass (``steering.py`` makes the vector).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from .hooks import hook_input

if TYPE_CHECKING:
    from .loaded_model import LoadedModel


@dataclass(frozen=True)
class SteeringVector:
    """A steering made ready: the vector [hidden] (float32) added, times ``alpha``, to block ``block``'s input."""

    block: int
    alpha: float
    vector: np.ndarray = field(repr=False)
    toward: str
    away: str

    @property
    def norm(self) -> float:
        """The vector's own norm (before alpha)."""
        return float(np.linalg.norm(self.vector.astype(np.float64)))

    def shift(self) -> np.ndarray:
        """What is added at every position: ``alpha * vector`` rounded to float32 once."""
        return (np.float32(self.alpha) * self.vector).astype(np.float32)


@contextmanager
def steered(loaded: LoadedModel, steering: SteeringVector | None):
    """Within it, this thread's passes have ``alpha * vector`` added to block B's input at every position (a forward
    pre-hook on the block, removed on exit); ``None`` steers nothing."""
    if steering is None:
        yield
        return
    block = loaded.module("layer", steering.block)
    shift = torch.from_numpy(steering.shift())

    def add_shift(_module, args, kwargs):
        if args:
            hidden = args[0]
            return (hidden + shift.to(device=hidden.device, dtype=hidden.dtype), *args[1:]), kwargs
        hidden = kwargs["hidden_states"]
        return args, {**kwargs, "hidden_states": hidden + shift.to(device=hidden.device, dtype=hidden.dtype)}

    handle = hook_input(block, add_shift, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()
