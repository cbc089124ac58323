"""Typed failures whose messages say what was tried, so the CLI and the page can show them as they are."""


class BackendError(Exception):
    """Base of every failure the backend reports to a user."""


class ModelLoadError(BackendError):
    """A model could not be loaded."""


class ModelNotFoundError(ModelLoadError):
    """Neither a local folder nor a Hub repository of that name exists."""


class ModelNotCachedError(ModelLoadError):
    """The Hub cannot be reached (offline or no network) and the model is not in the local cache."""


class UnsupportedArchitectureError(ModelLoadError):
    """The checkpoint's architecture has no family mapping."""


class PromptError(BackendError, ValueError):
    """The prompt cannot be run: empty, or longer than the model's positions."""


class ModelPreparationError(ModelLoadError):
    """A model's copy from the package index could not be prepared: checksum mismatch, disk full, a bad file."""


class FamilyMismatchError(ModelLoadError):
    """The load probe found an identity of the family's anatomy broken: the model is not built as its family says."""
