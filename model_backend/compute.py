"""How a model can compute, by name, and which way is fastest here (no torch import: the page's settings read it).

``float32`` and ``bfloat16`` keep weights, stream and matmuls in one dtype. ``bfloat16-matmuls`` keeps the weights,
the residual stream, the norms and the readout in float32 and runs only the blocks' matrix products in bfloat16
(torch's autocast): on a CPU that multiplies bfloat16 natively its linear layers run faster, and "The capital of
France is" still reads " Paris" (``docs/precision.md`` and ``docs/performance.md`` have the figures).
"""

from __future__ import annotations

from pathlib import Path

DTYPE_NAMES = ("float32", "bfloat16", "bfloat16-matmuls")
NATIVE_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")


def fastest_dtype(device: str = "cpu") -> str:
    """The dtype name a page uses by default: bfloat16 matmuls on a CPU whose /proc/cpuinfo flags say it multiplies
    bfloat16 natively, float32 everywhere else (an accelerator's user picks with ``--dtype``)."""
    return "bfloat16-matmuls" if device == "cpu" and cpu_multiplies_bfloat16() else "float32"


def cpu_multiplies_bfloat16() -> bool:
    """Whether this CPU's /proc/cpuinfo flags name bfloat16 instructions (False where the file cannot be read)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return any(flag in flags for flag in NATIVE_BFLOAT16_FLAGS)


def emulated_bfloat16_warning(device: str, dtype: str) -> str:
    """What to tell whoever chose bfloat16 for a CPU without bfloat16 instructions, or "": torch then emulates every
    bfloat16 product in software, slower than in float32 (``docs/precision.md`` has the figures)."""
    if device != "cpu" or dtype not in ("bfloat16", "bfloat16-matmuls") or cpu_multiplies_bfloat16():
        return ""
    return (f"--dtype {dtype}: this CPU has no bfloat16 instructions ({' or '.join(NATIVE_BFLOAT16_FLAGS)}), so "
            f"torch emulates every bfloat16 product and each run is much slower than in float32; "
            f"--dtype auto chooses float32 here")
