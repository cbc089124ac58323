"""Capture a Hugging Face causal LM's residual stream under standardized names, and analyse it (no UI code).

Names are imported on first use, so a page that only draws arrays (``model_backend.norms``, ``.tokens``) starts
without importing torch and transformers.
"""

from importlib import import_module

EXPORTS = {
    "attribution": ("LogitAttribution", "direct_logit_attribution"),
    "boundaries": ("residual_boundaries",),
    "capture": ("capture_batch", "capture_run", "capture_token_ids"),
    "errors": ("BackendError", "ModelLoadError", "ModelNotCachedError", "ModelNotFoundError",
               "ModelPreparationError", "PromptError",
               "UnsupportedArchitectureError"),
    "export": ("write_npz",),
    "interventions": ("ScalingSweep", "clean_logprob", "scaled_logprob", "scaling_sweep", "unscaled_logprob"),
    "loading": ("LoadedModel", "load_model"),
    "lens": ("LogitLens", "joined_lens", "logit_lens"),
    "norms": ("SinkReport", "detect_sinks", "residual_norms"),
    "run": ("Run",),
    "similarity": ("LaminarProfile", "laminar_profile", "token_across_layers", "tokens_within_layer"),
}
MODULE_OF = {name: module for module, names in EXPORTS.items() for name in names}
__all__ = sorted(MODULE_OF)


def __getattr__(name: str):
    if name not in MODULE_OF:
        raise AttributeError(f"module 'model_backend' has no attribute {name!r}")
    return getattr(import_module(f".{MODULE_OF[name]}", __name__), name)
