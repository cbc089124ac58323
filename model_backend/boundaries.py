"""The residual stream's boundaries: where a token's vector can be read between the model's parts."""

from __future__ import annotations

from .run import Run


def residual_boundaries(run: Run, *, with_final_norm: bool = False) -> list[tuple[str, str]]:
    """(label, full name) for the embeddings, every block's output and, if asked, the final norm's output.

    The embeddings row is ``layers.0.layer_input``: token plus position embeddings, what enters block 0.
    """
    boundaries = [("embeddings", "layers.0.layer_input")]
    boundaries += [(f"block {i}", f"layers.{i}.layer_output") for i in range(run.n_layers)]
    if with_final_norm:
        boundaries.append(("final norm", "final_norm_output"))
    return boundaries
