"""The load probe: one short pass through a freshly loaded model, checking that its family describes it.

Each identity that the family's anatomy implies is checked on the captured values: the embeddings make block 0's
input, each block's output is its input plus what its sublayers wrote, one block's output is the next one's
input, the final norm's output through the readout gives the model's logits, and the captured boundaries equal
transformers' own ``output_hidden_states``. A model the family does not fit fails here, naming the identity that
broke, instead of drawing wrong pictures.
"""

from __future__ import annotations

import numpy as np
import torch

from .capture import as_numpy, capture_token_ids, to_model
from .errors import FamilyMismatchError
from .loaded_model import LoadedModel
from .names import full_name
from .readout import unembed
from .run import Run

PROBE_LENGTH = 8
# Relative to the largest magnitude compared: float32 rounding of sums in another order, and bfloat16's 8 bits.
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-9}
LOW_PRECISION_TOLERANCE = 2e-2


def probe_token_ids(loaded: LoadedModel) -> list[int]:
    """A few ordinary token ids, the same for every model of a vocabulary."""
    return [(101 + 997 * position) % loaded.config.vocab_size for position in range(PROBE_LENGTH)]


def check_identity(loaded: LoadedModel, identity: str, actual: np.ndarray, expected: np.ndarray) -> None:
    """Raise FamilyMismatchError naming ``identity`` unless the two sides agree to the model dtype's tolerance."""
    scale = max(float(np.abs(expected).max()), 1.0)
    difference = float(np.abs(actual - expected).max()) if actual.shape == expected.shape else float("inf")
    tolerance = TOLERANCE.get(loaded.precision, LOW_PRECISION_TOLERANCE) * scale
    if not difference <= tolerance:
        raise FamilyMismatchError(
            f"{loaded.display_name} does not fit the {loaded.family.name} family: {identity} fails "
            f"(largest difference {difference:.3g}, tolerance {tolerance:.3g})")


def block_identities(run: Run, layer: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(identity, left, right) for one block: input plus its writes is its output, by way of layer_mid if any."""
    def value(name: str) -> np.ndarray:
        return run[full_name(name, layer)]

    layer_input, layer_output = full_name("layer_input", layer), full_name("layer_output", layer)
    attention, mlp, mid = (full_name(name, layer) for name in ("attention_output", "mlp_output", "layer_mid"))
    if mid not in run:
        return [(f"{layer_input} + {attention} + {mlp} == {layer_output}",
                 value("layer_input") + value("attention_output") + value("mlp_output"), value("layer_output"))]
    return [(f"{layer_input} + {attention} == {mid}", value("layer_input") + value("attention_output"),
             value("layer_mid")),
            (f"{mid} + {mlp} == {layer_output}", value("layer_mid") + value("mlp_output"), value("layer_output"))]


def embedding_identities(loaded: LoadedModel, run: Run) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The embedding lookup (times the family's scale) is token_embeddings, and the embeddings make block 0's input."""
    lookup = as_numpy(loaded.module("embed_tokens").weight[torch.from_numpy(run.token_ids)])
    if loaded.family.embedding_scale == "sqrt_hidden":
        lookup = lookup * np.float32(loaded.config.hidden_size ** 0.5)
    stream = run["token_embeddings"] + (run["position_embeddings"] if "position_embeddings" in run else 0)
    entering = "token_embeddings + position_embeddings" if "position_embeddings" in run else "token_embeddings"
    return [("embedding rows (times the family's scale) == token_embeddings", run["token_embeddings"], lookup),
            (f"{entering} == {full_name('layer_input', 0)}", stream, run[full_name("layer_input", 0)])]


def check_family_fits(loaded: LoadedModel) -> None:
    """Run the probe and check every identity of the family's anatomy; raise FamilyMismatchError on the first break."""
    token_ids = probe_token_ids(loaded)
    run = capture_token_ids(loaded, token_ids)
    with loaded.computing():
        reference = loaded.model(input_ids=torch.tensor([token_ids], device=loaded.model.device), use_cache=False,
                                 output_hidden_states=True)
    identities = embedding_identities(loaded, run)
    last = loaded.n_layers - 1
    for layer in range(loaded.n_layers):
        identities += block_identities(run, layer)
        if layer < last:
            identities.append((f"{full_name('layer_output', layer)} == {full_name('layer_input', layer + 1)}",
                               run[full_name("layer_output", layer)], run[full_name("layer_input", layer + 1)]))
    with loaded.computing():
        final_norm = as_numpy(loaded.module("final_norm")(to_model(loaded, run[full_name("layer_output", last)]))[0])
        logits = as_numpy(unembed(loaded, to_model(loaded, run["final_norm_output"]))[0])
    identities += [(f"final norm of {full_name('layer_output', last)} == final_norm_output", final_norm,
                    run["final_norm_output"]),
                   ("readout of final_norm_output == the model's logits", logits, as_numpy(reference.logits[0]))]
    hidden_states = [as_numpy(state[0]) for state in reference.hidden_states]
    # hidden_states[i] enters block i; the last one is already through the final norm.
    identities += [(f"{full_name('layer_input', layer)} == output_hidden_states[{layer}]",
                    run[full_name("layer_input", layer)], hidden_states[layer]) for layer in range(loaded.n_layers)]
    identities.append((f"final_norm_output == output_hidden_states[{loaded.n_layers}]", run["final_norm_output"],
                       hidden_states[-1]))
    for identity, actual, expected in identities:
        check_identity(loaded, identity, actual, expected)
