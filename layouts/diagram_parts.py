"""The parts of the block diagram as data: what each box is called, the family role it stands for, the
standardized values read there, and where it is drawn."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PartKind:
    """One kind of box: its label, the family role (module) it stands for, and the values read there."""

    key: str
    label: str
    role: str | None
    value_names: tuple[str, ...]
    per_layer: bool


CHAIN_KINDS = (
    PartKind("token_embeddings", "token emb", "embed_tokens", ("token_embeddings",), False),
    PartKind("position_embeddings", "+ pos emb", "embed_positions", ("position_embeddings",), False),
    PartKind("block", "block {i}", "layer", ("layer_input", "layer_output"), True),
    PartKind("final_norm", "final norm", "final_norm", ("final_norm_output",), False),
    PartKind("lm_head", "lm_head", "lm_head", ("logits",), False),
)
OPEN_BLOCK_KINDS = (
    PartKind("attention_norm", "input norm", "attention_norm", ("layer_input",), True),
    PartKind("attention", "attention", "attention", ("attention_output", "attention_probabilities"), True),
    PartKind("attention_add", "⊕ add", "mlp_norm", ("layer_mid",), True),
    PartKind("mlp_norm", "MLP norm", "mlp_norm", ("layer_mid",), True),
    PartKind("mlp", "MLP", "mlp", ("mlp_output",), True),
    PartKind("mlp_add", "⊕ add", "layer", ("layer_output",), True),
)
KINDS = {kind.key: kind for kind in CHAIN_KINDS + OPEN_BLOCK_KINDS}

# Open-block boxes relative to the block's frame top: (x, dy, width, height); the stream runs down x = 2.7.
OPEN_BLOCK_GEOMETRY = {
    "attention_norm": (4.6, 1.1, 2.2, 0.7),
    "attention": (4.6, 2.1, 2.2, 0.7),
    "attention_add": (2.7, 3.0, 1.0, 0.6),
    "mlp_norm": (4.6, 3.9, 2.2, 0.7),
    "mlp": (4.6, 4.9, 2.2, 0.7),
    "mlp_add": (2.7, 5.8, 1.0, 0.6),
}
FRAME_HEIGHT = 6.4
FRAME_LEFT, FRAME_RIGHT = 1.9, 6.1
STREAM_X = 2.7


@dataclass(frozen=True)
class Part:
    """One box of the diagram: its id (``attention.3``, ``final_norm``), kind, block and rectangle."""

    id: str
    kind: PartKind
    layer: int | None
    x: float
    y: float
    width: float
    height: float

    @property
    def label(self) -> str:
        return self.kind.label.format(i=self.layer)

    def full_names(self) -> list[str]:
        """The standardized full names read at this part, e.g. ``layers.3.attention_output``."""
        return [f"layers.{self.layer}.{name}" if self.kind.per_layer else name for name in self.kind.value_names]

    def contains(self, x: float, y: float) -> bool:
        return abs(x - self.x) <= self.width / 2 and abs(y - self.y) <= self.height / 2


def part_id(kind_key: str, layer: int | None = None) -> str:
    """The id a part is pinned under: ``attention.3`` for a block's part, ``final_norm`` for the model's."""
    return kind_key if layer is None else f"{kind_key}.{layer}"


def parse_part_id(part_id_text: str, n_layers: int) -> tuple[PartKind, int | None] | None:
    """The kind and block of a pinned id, or None when it names nothing in a model of ``n_layers`` blocks."""
    key, _, layer_text = part_id_text.partition(".")
    kind = KINDS.get(key)
    if kind is None or kind.per_layer != bool(layer_text):
        return None
    if not kind.per_layer:
        return kind, None
    if not (layer_text.isascii() and layer_text.isdigit()) or int(layer_text) >= n_layers:
        return None
    return kind, int(layer_text)


def chain_kinds(n_layers: int, has_position_embeddings: bool) -> list[tuple[PartKind, int | None]]:
    """The chain from embeddings to lm_head, one entry per box, top to bottom."""
    chain = []
    for kind in CHAIN_KINDS:
        if kind.key == "position_embeddings" and not has_position_embeddings:
            continue
        chain += [(kind, layer) for layer in range(n_layers)] if kind.per_layer else [(kind, None)]
    return chain


def diagram_parts(n_layers: int, open_layer: int, has_position_embeddings: bool) -> list[Part]:
    """Every box: the chain in a column at x = 0, and block ``open_layer`` drawn open to its right."""
    parts = [Part(part_id(kind.key, layer), kind, layer, 0.0, -float(row), 1.6, 0.72)
             for row, (kind, layer) in enumerate(chain_kinds(n_layers, has_position_embeddings))]
    top = open_block_top(len(parts), open_layer + 1 + has_position_embeddings)
    for key, (x, dy, width, height) in OPEN_BLOCK_GEOMETRY.items():
        parts.append(Part(part_id(key, open_layer), KINDS[key], open_layer, x, top - dy, width, height))
    return parts


def open_block_top(n_rows: int, block_row: int) -> float:
    """The open block's frame top: level with its block in the chain, kept inside the chain's height."""
    lowest_top = -(n_rows - 1) - 0.4 + FRAME_HEIGHT
    return min(0.4, max(-block_row + 0.4, lowest_top)) if lowest_top < 0.4 else 0.4


def part_at(parts: list[Part], x: float, y: float) -> Part | None:
    """The box under a click, if any."""
    return next((part for part in parts if part.contains(x, y)), None)
