"""Write a Run as one NPZ file: the contract the CLI, the page's download and other tools rely on.

Keys are the standardized full names without a batch axis, float32 values, integer ids and a unicode string array
for the tokens (nothing pickled), plus ``logit_lens.top_ids`` / ``logit_lens.top_probs`` of shape
[n_layers + 1, seq, k], and ``metadata``: a one-element string array, the JSON saying which model, prompt and
packages made the file. Patterns are recomputed one layer at a time and streamed into the archive, so exporting a
long prompt never holds every layer's pattern at once; logits not read yet are computed and written a block of
positions at a time (at a 262,144-token vocabulary they take 1 MB per position).

A patching export (``write_patching_npz``) holds ``patching.clean`` and ``patching.corrupted`` (the two runs'
metric, scalars), ``patching.layer_output``, ``patching.attention_output`` and ``patching.mlp_output``
([n_layers, seq], the raw metric with that value patched), both prompts' tokens and the same ``metadata`` entry,
which also names the corrupted prompt and the two tokens compared.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .lens import LOGITS_PER_MATMUL, logit_lens
from .loaded_model import LoadedModel
from .names import parse_full_name
from .patching import PATCHED_SITES, Patching
from .run import Run

EXPORT_TOP_K = 10
RECORDED_PACKAGES = ("residual-stream-explorer", "torch", "transformers", "numpy")


@dataclass(frozen=True)
class Rows:
    """A float32 array written to the archive a block of rows at a time, never held whole."""

    shape: tuple[int, ...]
    read: Callable[[slice], np.ndarray]  # rows -> their values
    rows_per_block: int


def logit_rows(run: Run) -> Rows | np.ndarray:
    """The run's logits: as they are if already read, else read as they are written."""
    if "logits" in run.values:
        return run.logits
    shape = run.shape_of("logits")
    return Rows(shape, run.logits_at, max(1, LOGITS_PER_MATMUL // shape[1]))


def write_rows(member: BinaryIO, rows: Rows) -> None:
    """An .npy file of ``rows``: numpy's header, then each block's bytes in order."""
    np.lib.format.write_array_header_1_0(member, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                                                  "fortran_order": False, "shape": rows.shape})
    for start in range(0, rows.shape[0], rows.rows_per_block):
        member.write(np.ascontiguousarray(rows.read(slice(start, start + rows.rows_per_block)),
                                          dtype=np.float32).tobytes())


def package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def run_metadata(loaded: LoadedModel, run: Run) -> dict:
    """What a reader of the file needs to reproduce it: model, where it came from, the revision asked for and the
    commit it resolved to, dtype and device, prompt, BOS, token count, package versions and the time it was written
    (UTC)."""
    return {"model": loaded.display_name, "source": loaded.source, "origin": loaded.origin,
            "revision": loaded.revision, "commit": loaded.commit,
            "dtype": loaded.dtype, "device": str(loaded.model.device),
            "prompt": run.prompt, "bos": run.bos, "n_tokens": run.seq_len,
            "packages": {name: package_version(name) for name in RECORDED_PACKAGES},
            "written": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def export_arrays(loaded: LoadedModel, run: Run, *, k: int = EXPORT_TOP_K):
    """Yield (key, array) for every entry of the export, in a stable order."""
    yield "metadata", np.array([json.dumps(run_metadata(loaded, run), ensure_ascii=False)])
    yield "token_ids", run.token_ids
    yield "tokens", np.array(run.tokens, dtype=np.str_)
    for name in run.value_names():
        value, layer, _ = parse_full_name(name)
        if value.name == "attention_probabilities":
            yield name, run.attention_probabilities(layer)
        else:
            yield name, logit_rows(run) if name == "logits" else run[name]
    lens = logit_lens(loaded, run, k=k)
    yield "logit_lens.top_ids", lens.top_ids
    yield "logit_lens.top_probs", lens.top_probs


def write_npz(loaded: LoadedModel, run: Run, destination: str | Path | BinaryIO, *, k: int = EXPORT_TOP_K) -> None:
    """Write the export as an uncompressed NPZ that ``numpy.load`` reads with ``allow_pickle=False``."""
    write_arrays(export_arrays(loaded, run, k=k), destination)


def write_arrays(arrays, destination: str | Path | BinaryIO) -> None:
    """Stream (key, array) pairs into an uncompressed NPZ, one member at a time, nothing pickled."""
    with zipfile.ZipFile(destination, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, array in arrays:
            with archive.open(f"{key}.npy", mode="w", force_zip64=True) as member:
                if isinstance(array, Rows):
                    write_rows(member, array)
                else:
                    np.lib.format.write_array(member, np.asarray(array, order="C"), allow_pickle=False)


def patching_metadata(loaded: LoadedModel, patching: Patching) -> dict:
    """The run's metadata for the clean prompt, plus the corrupted prompt, the metric and its two tokens."""
    pair = patching.pair
    return {**run_metadata(loaded, pair.clean), "corrupted_prompt": pair.corrupted.prompt,
            "metric": "logit[answer] - logit[wrong] at the last position",
            "answer": pair.answer, "answer_id": pair.answer_id, "wrong": pair.wrong, "wrong_id": pair.wrong_id}


def patching_arrays(loaded: LoadedModel, patching: Patching):
    """Yield (key, array) for every entry of a patching export, in a stable order."""
    pair = patching.pair
    yield "metadata", np.array([json.dumps(patching_metadata(loaded, patching), ensure_ascii=False)])
    yield "patching.clean_tokens", np.array(pair.clean.tokens, dtype=np.str_)
    yield "patching.corrupted_tokens", np.array(pair.corrupted.tokens, dtype=np.str_)
    yield "patching.clean", np.float32(pair.clean_metric)
    yield "patching.corrupted", np.float32(pair.corrupted_metric)
    for site in PATCHED_SITES:
        yield f"patching.{site}", patching.grids[site].astype(np.float32)


def write_patching_npz(loaded: LoadedModel, patching: Patching, destination: str | Path | BinaryIO) -> None:
    """Write a patching export as an uncompressed NPZ that ``numpy.load`` reads with ``allow_pickle=False``."""
    write_arrays(patching_arrays(loaded, patching), destination)
