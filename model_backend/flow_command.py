"""``python -m model_backend flow``: one prompt's information-flow shares, in float32 and with no threshold, written
to an NPZ file a block at a time (the [layer, head, query, key] table is never held whole).

Keys: ``flow.attention_heads`` [n_layers, heads, query, key]; ``flow.attention_residual``, ``flow.attention_bias``
(zeros where the output projection has no bias), ``flow.mlp``, ``flow.mlp_residual`` [n_layers, seq];
``flow.attention_check`` and ``flow.mlp_check`` (the largest |sum of parts - whole|), ``flow.sink_positions``,
``token_ids``, ``tokens`` and the export's ``metadata``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from .capture import capture_run
from .export import Rows, run_metadata, write_arrays
from .flow import check_decomposed, layer_flow
from .loaded_model import LoadedModel
from .loading import load_model
from .norms import detect_sinks
from .run import Run

SMALL_TABLES = {"attention_residual": "residual", "attention_bias": "bias", "mlp": "mlp",
                "mlp_residual": "mlp_residual"}


def add_flow_arguments(commands, model_help: str) -> None:
    """The ``flow`` command's arguments, on the CLI's subparsers."""
    flow = commands.add_parser("flow", help="write one prompt's information-flow shares (every head's, key's, "
                                            "residual's and MLP's share of each block's sums) to an NPZ file")
    flow.add_argument("--model", required=True, help=model_help)
    flow.add_argument("--prompt", required=True, help="the text to run")
    flow.add_argument("--bos", action="store_true", help="put the model's BOS token first")
    flow.add_argument("--out", required=True, help="the .npz file to write")


def flow_arrays(loaded: LoadedModel, run: Run):
    """Yield (key, array) for every entry of a flow export: the head table computed as it is written, block by
    block, then the per-position tables those blocks filled."""
    check_decomposed(loaded)
    layers = {}

    def read(rows: slice) -> np.ndarray:
        flows = [layers.setdefault(layer, layer_flow(loaded, run, layer)) for layer in range(run.n_layers)[rows]]
        return np.stack([flow.heads for flow in flows])

    yield "metadata", np.array([json.dumps(run_metadata(loaded, run), ensure_ascii=False)])
    yield "token_ids", run.token_ids
    yield "tokens", np.array(run.tokens, dtype=np.str_)
    yield "flow.attention_heads", Rows((run.n_layers, run.n_heads, run.seq_len, run.seq_len), read, 1)
    for key, field in SMALL_TABLES.items():
        yield f"flow.{key}", np.stack([getattr(layers[layer], field) for layer in range(run.n_layers)])
    yield "flow.attention_check", np.float32(max(flow.attention_check for flow in layers.values()))
    yield "flow.mlp_check", np.float32(max(flow.mlp_check for flow in layers.values()))
    yield "flow.sink_positions", np.array(detect_sinks(run).sink_positions, dtype=np.int64)


def flow(arguments: argparse.Namespace) -> str:
    loaded = load_model(arguments.model, dtype="float32")
    check_decomposed(loaded)
    run = capture_run(loaded, arguments.prompt, bos=arguments.bos)
    checks = {}

    def arrays():
        for key, array in flow_arrays(loaded, run):
            if key.endswith("_check"):
                checks[key] = float(array)
            yield key, array

    write_arrays(arrays(), arguments.out)
    return (f"wrote {arguments.out}: {run.seq_len} tokens, {run.n_layers} blocks of {run.model_name}; parts minus "
            f"whole at most {checks['flow.attention_check']:.1e} (attention), {checks['flow.mlp_check']:.1e} (MLP)")
