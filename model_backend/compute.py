"""How a model can compute, by name, and which way is fastest here (no torch import: the page's settings read it).

``float32`` and ``bfloat16`` keep weights, stream and matmuls in one dtype. ``bfloat16-matmuls`` keeps the weights,
the residual stream, the norms and the readout in float32 and runs only the blocks' matrix products in bfloat16
(torch's autocast): on a CPU that multiplies bfloat16 natively its linear layers are several times faster, and
"The capital of France is" still reads " Paris" (``docs/precision.md`` has the figures).
"""

from __future__ import annotations

from pathlib import Path

DTYPE_NAMES = ("float32", "bfloat16", "bfloat16-matmuls")
NATIVE_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")


def fastest_dtype(device: str = "cpu") -> str:
    """The dtype name a page uses by default: bfloat16 matmuls on a CPU whose /proc/cpuinfo flags say it multiplies
    bfloat16 natively, float32 everywhere else (an accelerator's user picks with ``--dtype``)."""
    if device != "cpu":
        return "float32"
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return "float32"
    return "bfloat16-matmuls" if any(flag in flags for flag in NATIVE_BFLOAT16_FLAGS) else "float32"
