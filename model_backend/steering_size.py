"""How large a steering is beside the stream it is added to, read from a steered run's own values (numpy only,
so the page's cards can say it without torch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .names import full_name
from .run import Run

if TYPE_CHECKING:
    from .steered_pass import SteeringVector


@dataclass(frozen=True)
class SteeringReport:
    """The vector's size against the stream it is added to: a shift far below the stream's norm changes little."""

    block: int
    vector_norm: float  # ||alpha * vector||
    median_input_norm: float  # the median over positions of ||layers.{B}.layer_input|| in the run
    ratio: float  # vector_norm / median_input_norm


def steering_report(run: Run, steering: SteeringVector) -> SteeringReport:
    """How large the shift ``alpha * vector`` is beside the median norm of block B's input over the run's positions."""
    norms = np.linalg.norm(run[full_name("layer_input", steering.block)].astype(np.float64), axis=-1)
    median = float(np.median(norms))
    shift_norm = abs(steering.alpha) * steering.norm
    return SteeringReport(block=steering.block, vector_norm=shift_norm, median_input_norm=median,
                          ratio=shift_norm / median if median > 0 else float("inf"))
