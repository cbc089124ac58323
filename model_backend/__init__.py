"""Capture a Hugging Face causal LM's residual stream under standardized names, and analyse it (no UI code).

The names below are imported on first use, not here: the page imports ``model_backend.norms`` and ``.tokens`` to draw
arrays, and a plain import of this package would then load torch and transformers before the page is shown
(``tests/test_imports.py``). The imports under ``TYPE_CHECKING`` are the same names, written out for readers and tools.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # F401 below: each name is exported by __getattr__ and __all__, which pyflakes cannot read
    from .attribution import LogitAttribution, direct_logit_attribution  # noqa: F401
    from .boundaries import residual_boundaries  # noqa: F401
    from .capture import capture_batch, capture_run, capture_token_ids  # noqa: F401
    from .commitment import commitment_blocks  # noqa: F401
    from .errors import (BackendError, ModelLoadError, ModelNotCachedError, ModelNotFoundError,  # noqa: F401
                         ModelPreparationError, PromptError, UnsupportedArchitectureError)
    from .export import write_npz  # noqa: F401
    from .generation import (DecodeStep, Decoder, Generation, WriteSettings, capture_generation,  # noqa: F401
                             generate_tokens, start_decoding)
    from .interventions import (ScalingSweep, clean_logprob, scaled_logprob, scaling_sweep,  # noqa: F401
                                unscaled_logprob)
    from .lens import LogitLens, joined_lens, logit_lens  # noqa: F401
    from .loaded_model import LoadedModel  # noqa: F401
    from .loading import load_model  # noqa: F401
    from .norms import SinkReport, detect_sinks, residual_norms  # noqa: F401
    from .patching import Patching, activation_patching, patched_blocks, patching_pair  # noqa: F401
    from .run import Run  # noqa: F401
    from .similarity import (LaminarProfile, laminar_profile, token_across_layers,  # noqa: F401
                             tokens_within_layer)
    from .steered_pass import SteeringVector, steered  # noqa: F401
    from .steering import Steering, steering_for, steering_vector  # noqa: F401
    from .steering_size import SteeringReport, steering_report  # noqa: F401

EXPORTS = {
    "attribution": ("LogitAttribution", "direct_logit_attribution"),
    "boundaries": ("residual_boundaries",),
    "capture": ("capture_batch", "capture_run", "capture_token_ids"),
    "commitment": ("commitment_blocks",),
    "errors": ("BackendError", "ModelLoadError", "ModelNotCachedError", "ModelNotFoundError",
               "ModelPreparationError", "PromptError",
               "UnsupportedArchitectureError"),
    "export": ("write_npz",),
    "generation": ("DecodeStep", "Decoder", "Generation", "WriteSettings", "capture_generation", "generate_tokens",
                   "start_decoding"),
    "interventions": ("ScalingSweep", "clean_logprob", "scaled_logprob", "scaling_sweep", "unscaled_logprob"),
    "loaded_model": ("LoadedModel",),
    "loading": ("load_model",),
    "lens": ("LogitLens", "joined_lens", "logit_lens"),
    "norms": ("SinkReport", "detect_sinks", "residual_norms"),
    "patching": ("Patching", "activation_patching", "patched_blocks", "patching_pair"),
    "run": ("Run",),
    "similarity": ("LaminarProfile", "laminar_profile", "token_across_layers", "tokens_within_layer"),
    "steered_pass": ("SteeringVector", "steered"),
    "steering": ("Steering", "steering_for", "steering_vector"),
    "steering_size": ("SteeringReport", "steering_report"),
}
MODULE_OF = {name: module for module, names in EXPORTS.items() for name in names}
__all__ = sorted(MODULE_OF)


def __getattr__(name: str):
    if name not in MODULE_OF:
        raise AttributeError(f"module 'model_backend' has no attribute {name!r}")
    return getattr(import_module(f".{MODULE_OF[name]}", __name__), name)
