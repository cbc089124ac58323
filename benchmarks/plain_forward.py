"""The plain forward every benchmark divides by: ``model(input_ids, logits_to_keep=1)`` of the same model loaded as
the page loads it (its precision, eager attention, its device), with ``model(input_ids)`` and the float32 eager
forward beside it for reference.

The page computes in ``viz_app.settings.configured_compute`` (bfloat16 matmuls on a CPU that multiplies bfloat16
natively): a ratio to the float32 forward would flatter the page by the precision's speed-up alone. A run reads
the logits at its last position only (the lens and the attribution read others when asked): a ratio to
``model(input_ids)``, which multiplies every position by the whole unembedding, would flatter it too, the more so
the larger the vocabulary (``docs/performance.md`` has the figures).
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


def median_seconds(call, repeats: int) -> float:
    """Median seconds of ``call()`` over ``repeats`` calls, after a warm-up call."""
    times = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def median_forward_seconds(loaded: LoadedModel, token_ids: list[int], repeats: int, logits_to_keep: int = 1,
                           ) -> float:
    """Median seconds of ``model(input_ids)`` in the model's own compute mode, after a warm-up call, with the logits
    of the last ``logits_to_keep`` positions (0: every position's)."""
    input_ids = torch.tensor([token_ids], device=loaded.model.device)

    def forward() -> None:
        loaded.model(input_ids=input_ids, use_cache=False, logits_to_keep=logits_to_keep)
        synchronize(loaded)

    with loaded.computing():
        return median_seconds(forward, repeats)


def synchronize(loaded: LoadedModel) -> None:
    """Wait for an accelerator's queued work, so that a timing covers it."""
    if loaded.model.device.type == "cuda":
        torch.cuda.synchronize()


def forward_seconds(source: str, token_lists: list[list[int]], repeats: int, device: str = "cpu",
                    page: LoadedModel | None = None) -> tuple[str, list[float], list[float], list[float]]:
    """The page's compute (as the page names it) and, per token list, the median plain forward in it (the last
    position's logits), ``model(input_ids)`` in it, and ``model(input_ids)`` in float32 eager on the same device,
    the three taking turns list by list. ``page``: the model loaded in the page's compute, where the caller has it."""
    page = page or load_model(source, **page_compute(device))
    reference = page if page.dtype == "float32" else load_model(source, device=device)
    same, every_logit, float32 = [], [], []
    for token_ids in token_lists:
        same.append(median_forward_seconds(page, token_ids, repeats))
        every_logit.append(median_forward_seconds(page, token_ids, repeats, logits_to_keep=0))
        float32.append(median_forward_seconds(reference, token_ids, repeats, logits_to_keep=0))
    return page.compute, same, every_logit, float32
