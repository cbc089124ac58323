"""Architecture families, one small mapping per module of this package; adding a family adds one module.

Each module holds ``FAMILIES``, a tuple of ``Family``; a model type served by two of them is told apart by ``when``.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module

from ..errors import UnsupportedArchitectureError
from .family import Family

FAMILIES: tuple[Family, ...] = tuple(
    family for module in sorted(info.name for info in pkgutil.iter_modules(__path__)) if module != "family"
    for family in import_module(f".{module}", __name__).FAMILIES
)
SUPPORTED_MODEL_TYPES = tuple(dict.fromkeys(t for family in FAMILIES for t in family.model_types))


def family_for(config) -> Family:
    """The family that handles a config (its ``model_type``, then ``when``), or a clear error listing the supported."""
    for family in FAMILIES:
        if config.model_type in family.model_types and all(
                getattr(config, key, None) == value for key, value in family.when.items()):
            return family
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    raise UnsupportedArchitectureError(
        f"architecture {config.model_type!r} is not supported; supported model types: {supported}")


__all__ = ["FAMILIES", "Family", "SUPPORTED_MODEL_TYPES", "family_for"]
