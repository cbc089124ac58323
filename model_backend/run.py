"""A Run: everything one forward pass computed for one prompt, keyed by standardized names."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .names import MODEL_VALUES, full_name, parse_full_name

if TYPE_CHECKING:
    from .steered_pass import SteeringVector

# A run's arrays are read-only (several pages may show one run); torch reads them without copying, and every use
# here makes a new tensor from them (``.double()``, ``.to(...)``, arithmetic), so its warning about them is noise.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)


def read_only(array: np.ndarray) -> np.ndarray:
    """The array, made read-only in place: a run's values are shared, and nobody may change them."""
    array.flags.writeable = False
    return array


@dataclass
class Run:
    """The captured values of one prompt (no batch axis) and cheap attention summaries.

    The logits are computed from ``final_norm_output`` when first read (see ``logits``). Full attention patterns
    are not stored: ``attention_probabilities(layer)`` recomputes one layer's pattern from
    its stored input with the model's own modules, which gives the same numbers at a twelfth of the memory.
    """

    model_name: str
    prompt: str
    bos: bool
    token_ids: np.ndarray  # [seq] int64
    tokens: list[str]  # each token decoded alone, leading spaces kept
    values: dict[str, np.ndarray]  # standardized full name -> [seq, hidden] (logits: [seq, vocab])
    attention_column_sums: np.ndarray  # [layers, heads, key]: sum over queries of the pattern
    attention_diagonal: np.ndarray  # [layers, heads, key]: what each position gives itself
    value_norms: np.ndarray  # [layers, kv_heads, seq]: norm of each head's value vector
    n_layers: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int  # the logits' width: their shape is known without computing them
    layer_value_names: tuple[str, ...]  # the per-block values the model's family has, in the vocabulary's order
    seconds: float
    recompute_pattern: Callable[[int], np.ndarray] = field(repr=False)
    read_logits: Callable[[object], np.ndarray] = field(repr=False)  # positions -> [positions, vocab]
    steering: SteeringVector | None = None  # the vector added to a block's input in this pass (``steering.py``)
    generated_from: int | None = None  # the first position the model wrote itself (``generation.py``); None: none

    def __post_init__(self) -> None:
        for array in (self.token_ids, self.attention_column_sums, self.attention_diagonal, self.value_norms,
                      *self.values.values()):
            read_only(array)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.logits if key == "logits" else self.values[key]

    def __contains__(self, key: str) -> bool:
        return key == "logits" or key in self.values

    @property
    def seq_len(self) -> int:
        return len(self.token_ids)

    @property
    def logits(self) -> np.ndarray:
        """The model's logits [seq, vocab], computed from final_norm_output by lm_head when first read, then kept."""
        if "logits" not in self.values:
            self.values["logits"] = read_only(self.read_logits(slice(None)))
        return self.values["logits"]

    def logits_at(self, positions) -> np.ndarray:
        """The logits at some positions only, without computing the rest if they were not read yet."""
        return self.values["logits"][positions] if "logits" in self.values else self.read_logits(positions)

    def attention_probabilities(self, layer: int) -> np.ndarray:
        """The pattern of one block, [heads, query, key], recomputed from the block's stored ``layer_input``."""
        if not 0 <= layer < self.n_layers:
            raise IndexError(f"layer {layer} is outside 0..{self.n_layers - 1}")
        return self.recompute_pattern(layer)

    def value_names(self) -> list[str]:
        """Every standardized full name this run holds, in the vocabulary's order (patterns included)."""
        names = [full_name(v.name) for v in MODEL_VALUES if full_name(v.name) in self]
        for layer in range(self.n_layers):
            names += [full_name(name, layer) for name in self.layer_value_names]
        return names

    def shape_of(self, key: str) -> tuple[int, ...]:
        """The shape of a value, patterns and logits included, without computing either (a card asks for the shape of
        logits that, at a 262,144-token vocabulary, take a gigabyte per thousand tokens)."""
        if parse_full_name(key)[0].name == "attention_probabilities":
            return (self.n_heads, self.seq_len, self.seq_len)
        if key == "logits":
            return (self.seq_len, self.vocab_size)
        return self[key].shape
