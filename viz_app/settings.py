"""Which models this server offers: ``--args --models a,b``, else ``RSE_MODELS``, else GPT-2, SmolLM2-135M-Instruct
(from the package index when the Hub cannot serve it), then the shipped demo model; and where they compute:
``--args --device cuda --dtype bfloat16`` (default: the CPU, in float32 with its matmuls in bfloat16 where the CPU
multiplies bfloat16 natively, else in float32)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from functools import cache

from model_backend.compute import DTYPE_NAMES, emulated_bfloat16_warning, fastest_dtype
from model_backend.model_names import DEFAULT_MODELS

log = logging.getLogger(__name__)


def configured_models(argv: list[str] | None = None, environ: dict | None = None) -> list[str]:
    """Model sources in order of preference, from the command line, the environment or the defaults."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--models")
    arguments, _ = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    listed = arguments.models or (os.environ if environ is None else environ).get("RSE_MODELS", "")
    sources = [source.strip() for source in listed.split(",") if source.strip()]
    return sources or list(DEFAULT_MODELS)


def configured_compute(argv: list[str] | None = None) -> dict[str, str]:
    """The device and dtype models load with, as ``load_model``'s keyword arguments."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--device", choices=("cpu", "cuda", "mps", "auto"), default="cpu")
    parser.add_argument("--dtype", choices=(*DTYPE_NAMES, "auto"), default="auto")
    arguments, _ = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    dtype = fastest_dtype(arguments.device) if arguments.dtype == "auto" else arguments.dtype
    if warning := emulated_bfloat16_warning(arguments.device, dtype):
        warn_once(warning)
    return {"device": arguments.device, "dtype": dtype}


@cache
def warn_once(warning: str) -> None:
    """Put a warning about the server's settings in its log once, however many models and pages read them."""
    log.warning(warning)
