"""The residual stream's boundaries: where a token's vector can be read between the model's parts."""

from __future__ import annotations

from .names import full_name
from .run import Run


def residual_boundaries(run: Run, *, with_final_norm: bool = False) -> list[tuple[str, str]]:
    """(label, full name) for the embeddings, every block's output and, if asked, the final norm's output.

    The embeddings row is block 0's ``layer_input``: token plus position embeddings, what enters block 0.
    """
    boundaries = [("embeddings", full_name("layer_input", 0))]
    boundaries += [(f"block {i}", full_name("layer_output", i)) for i in range(run.n_layers)]
    if with_final_norm:
        boundaries.append(("final norm", "final_norm_output"))
    return boundaries
