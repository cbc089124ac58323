"""The parts of the block diagram as data: what each box is called, the family role it stands for, the
standardized values read there, and where it is drawn."""

from __future__ import annotations

from dataclasses import dataclass, replace

from model_backend.families import Family
from model_backend.names import full_name


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
    PartKind("logits", "logits", "lm_head", ("logits",), False),
)
# In the order drawn; a family's diagram keeps those whose module it has and whose values it defines (``kinds_of``).
OPEN_BLOCK_KINDS = (
    PartKind("attention_norm", "input norm", "attention_norm", ("layer_input",), True),
    PartKind("attention", "attention", "attention",
             ("attention_output", "attention_probabilities", "attention_post_norm_input"), True),
    PartKind("attention_post_norm", "attn post-norm", "attention_post_norm", ("attention_output",), True),
    PartKind("attention_add", "⊕ add", "layer", ("layer_mid",), True),
    PartKind("mlp_norm", "MLP norm", "mlp_norm", ("layer_mid",), True),
    PartKind("mlp", "MLP", "mlp", ("mlp_output", "mlp_post_norm_input"), True),
    PartKind("mlp_post_norm", "MLP post-norm", "mlp_post_norm", ("mlp_output",), True),
    PartKind("mlp_add", "⊕ add", "layer", ("layer_output",), True),
)
KINDS = {kind.key: kind for kind in CHAIN_KINDS + OPEN_BLOCK_KINDS}

# Open-block boxes relative to the block's frame top: sublayer parts at x = 4.6, adds on the stream at x = 2.7,
# one row each from FIRST_ROW down.
SUBLAYER_BOX = (4.6, 2.2, 0.7)  # (x, width, height)
ADD_BOX = (2.7, 1.0, 0.6)
FIRST_ROW, ROW_PITCH, FRAME_MARGIN = 1.1, 0.93, 0.55
FRAME_LEFT, FRAME_RIGHT = 1.9, 6.1
STREAM_X = 2.7
# The chain's boxes are one row apart, its blocks share at most BLOCKS_SPAN rows: 30 blocks fit beside the open one.
BLOCKS_SPAN = 12.0
BOX_FILL = 0.72  # the share of its row a chain box's height takes


def kinds_of(family: Family) -> dict[str, PartKind]:
    """The kinds of box a family's diagram has, each reading only the values the family defines: a post-norm
    block draws its post-norms, a parallel block has no add between its sublayers."""
    kinds = {}
    for kind in CHAIN_KINDS + OPEN_BLOCK_KINDS:
        names = tuple(name for name in kind.value_names if family.has_value(name))
        if names and family.module_path(kind.role, 0) is not None:
            kinds[kind.key] = replace(kind, value_names=names)
    return kinds


def open_block_kinds(family: Family) -> list[PartKind]:
    """The open block's boxes, top to bottom."""
    kinds = kinds_of(family)
    return [kinds[kind.key] for kind in OPEN_BLOCK_KINDS if kind.key in kinds]


def frame_height(family: Family) -> float:
    """The open block's frame height: one row per box."""
    return FIRST_ROW + ROW_PITCH * (len(open_block_kinds(family)) - 1) + FRAME_MARGIN


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
        return [full_name(name, self.layer if self.kind.per_layer else None) for name in self.kind.value_names]

    def contains(self, x: float, y: float) -> bool:
        return abs(x - self.x) <= self.width / 2 and abs(y - self.y) <= self.height / 2


def part_id(kind_key: str, layer: int | None = None) -> str:
    """The id a part is pinned under: ``attention.3`` for a block's part, ``final_norm`` for the model's."""
    return kind_key if layer is None else f"{kind_key}.{layer}"


def parse_part_id(part_id_text: str, family: Family, n_layers: int) -> tuple[PartKind, int | None] | None:
    """The kind and block of a pinned id, or None when it names nothing in the family's model of ``n_layers``."""
    return parse_among(part_id_text, kinds_of(family), n_layers)


def could_name_a_part(part_id_text: str) -> bool:
    """Whether an id (from a link, before any model is known) names a part some family has in some block."""
    return parse_among(part_id_text, KINDS, None) is not None


def parse_among(part_id_text: str, kinds: dict[str, PartKind], n_layers: int | None):
    """The kind and block an id names among ``kinds`` (any block when ``n_layers`` is None), or None."""
    key, _, layer_text = part_id_text.partition(".")
    kind = kinds.get(key)
    if kind is None or kind.per_layer != bool(layer_text):
        return None
    if not kind.per_layer:
        return kind, None
    if not (layer_text.isascii() and layer_text.isdigit()) or (n_layers is not None and int(layer_text) >= n_layers):
        return None
    return kind, int(layer_text)


def chain_kinds(family: Family, n_layers: int) -> list[tuple[PartKind, int | None]]:
    """The chain from embeddings to logits, one entry per box, top to bottom."""
    kinds = kinds_of(family)
    chain = []
    for kind in (kinds[kind.key] for kind in CHAIN_KINDS if kind.key in kinds):
        chain += [(kind, layer) for layer in range(n_layers)] if kind.per_layer else [(kind, None)]
    return chain


def block_pitch(n_layers: int) -> float:
    """The rows one block of the chain takes: a whole row up to 12 blocks, a share of BLOCKS_SPAN beyond."""
    return min(1.0, BLOCKS_SPAN / max(n_layers, 1))


def chain_heights(chain: list[tuple[PartKind, int | None]], n_layers: int) -> list[float]:
    """The y of each chain box's centre, top to bottom: each box takes its row (a block its pitch)."""
    rows = [block_pitch(n_layers) if kind.per_layer else 1.0 for kind, _ in chain]
    centres = [0.0]
    for above, below in zip(rows, rows[1:]):
        centres.append(centres[-1] - (above + below) / 2)
    return centres


def diagram_parts(family: Family, n_layers: int, open_layer: int) -> list[Part]:
    """Every box: the chain in a column at x = 0, and block ``open_layer`` drawn open to its right."""
    chain = chain_kinds(family, n_layers)
    pitch = block_pitch(n_layers)
    parts = [Part(part_id(kind.key, layer), kind, layer, 0.0, y, 1.6, BOX_FILL * (pitch if kind.per_layer else 1.0))
             for (kind, layer), y in zip(chain, chain_heights(chain, n_layers))]
    block_y = next(p.y for p in parts if p.id == f"block.{open_layer}")
    top = open_block_top(parts[-1].y, block_y, frame_height(family))
    for row, kind in enumerate(open_block_kinds(family)):
        x, width, height = ADD_BOX if kind.key.endswith("_add") else SUBLAYER_BOX
        parts.append(Part(part_id(kind.key, open_layer), kind, open_layer, x, top - FIRST_ROW - ROW_PITCH * row,
                          width, height))
    return parts


def open_block_top(chain_bottom: float, block_y: float, height: float) -> float:
    """The open block's frame top: level with its block in the chain, kept inside the chain's height."""
    lowest_top = chain_bottom - 0.4 + height
    return min(0.4, max(block_y + 0.4, lowest_top)) if lowest_top < 0.4 else 0.4


def part_at(parts: list[Part], x: float, y: float) -> Part | None:
    """The box under a click, if any."""
    return next((part for part in parts if part.contains(x, y)), None)
