"""Write a Run as one NPZ file: the contract the CLI, the page's download and other tools rely on.

Keys are the standardized full names without a batch axis, float32 values, integer ids and a unicode string array
for the tokens (nothing pickled), plus ``logit_lens.top_ids`` / ``logit_lens.top_probs`` of shape
[n_layers + 1, seq, k]. Patterns are recomputed one layer at a time and streamed into the archive, so exporting a
long prompt never holds every layer's pattern at once.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .loading import LoadedModel
from .lens import logit_lens
from .names import parse_full_name
from .run import Run

EXPORT_TOP_K = 10


def export_arrays(loaded: LoadedModel, run: Run, *, k: int = EXPORT_TOP_K):
    """Yield (key, array) for every entry of the export, in a stable order."""
    yield "token_ids", run.token_ids
    yield "tokens", np.array(run.tokens, dtype=np.str_)
    for name in run.value_names():
        value, layer, _ = parse_full_name(name)
        yield name, run.attention_probabilities(layer) if value.name == "attention_probabilities" else run[name]
    lens = logit_lens(loaded, run, k=k)
    yield "logit_lens.top_ids", lens.top_ids
    yield "logit_lens.top_probs", lens.top_probs


def write_npz(loaded: LoadedModel, run: Run, destination: str | Path | BinaryIO, *, k: int = EXPORT_TOP_K) -> None:
    """Write the export as an uncompressed NPZ that ``numpy.load`` reads with ``allow_pickle=False``."""
    with zipfile.ZipFile(destination, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, array in export_arrays(loaded, run, k=k):
            with archive.open(f"{key}.npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
