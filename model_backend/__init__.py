"""Capture a Hugging Face causal LM's residual stream under standardized names, and analyse it (no UI code)."""

from .attribution import LogitAttribution, direct_logit_attribution
from .boundaries import residual_boundaries
from .capture import capture_run, capture_token_ids
from .errors import (BackendError, ModelLoadError, ModelNotCachedError, ModelNotFoundError, PromptError,
                     UnsupportedArchitectureError)
from .export import write_npz
from .interventions import ScalingSweep, scaling_sweep
from .loading import LoadedModel, load_model
from .logit_lens import LogitLens, logit_lens
from .norms import SinkReport, detect_sinks, residual_norms
from .run import Run
from .similarity import LaminarProfile, laminar_profile, token_across_layers, tokens_within_layer

__all__ = [
    "BackendError", "LaminarProfile", "LoadedModel", "LogitAttribution", "LogitLens", "ModelLoadError",
    "ModelNotCachedError", "ModelNotFoundError", "PromptError", "Run", "ScalingSweep", "SinkReport",
    "UnsupportedArchitectureError", "capture_run", "capture_token_ids", "detect_sinks", "direct_logit_attribution",
    "laminar_profile",
    "load_model", "logit_lens", "residual_boundaries", "residual_norms", "scaling_sweep", "token_across_layers",
    "tokens_within_layer", "write_npz",
]
