"""The plain forward every benchmark divides by: ``model(input_ids)`` of the same model loaded as the page loads it
(its precision, eager attention, its device), with the float32 eager forward beside it for reference.

The page computes in ``viz_app.settings.configured_compute`` (bfloat16 matmuls on a CPU that multiplies bfloat16
natively): a ratio to the float32 forward would flatter the page by the precision's speed-up alone.
"""

from __future__ import annotations

import statistics
import time

import torch

from model_backend import LoadedModel, load_model
from viz_app.settings import configured_compute


def page_compute(device: str = "cpu") -> dict[str, str]:
    """Where and in what the page computes when served with ``--device device`` and no ``--dtype``."""
    return configured_compute(["--device", device])


def median_forward_seconds(loaded: LoadedModel, token_ids: list[int], repeats: int) -> float:
    """Median seconds of ``model(input_ids)`` in the model's own compute mode, after a warm-up call."""
    input_ids = torch.tensor([token_ids], device=loaded.model.device)
    times = []
    with loaded.computing():
        for _ in range(repeats + 1):
            started = time.perf_counter()
            loaded.model(input_ids=input_ids, use_cache=False)
            synchronize(loaded)
            times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def synchronize(loaded: LoadedModel) -> None:
    """Wait for an accelerator's queued work, so that a timing covers it."""
    if loaded.model.device.type == "cuda":
        torch.cuda.synchronize()


def forward_seconds(source: str, token_lists: list[list[int]], repeats: int, device: str = "cpu",
                    ) -> tuple[str, list[float], list[float]]:
    """The page's compute (as the page names it) and, per token list, the median plain forward in it and in
    float32 eager on the same device, the two taking turns list by list."""
    page = load_model(source, **page_compute(device))
    reference = page if page.dtype == "float32" else load_model(source, device=device)
    same, float32 = [], []
    for token_ids in token_lists:
        same.append(median_forward_seconds(page, token_ids, repeats))
        float32.append(median_forward_seconds(reference, token_ids, repeats))
    return page.compute, same, float32
