"""A loaded model ready for capture: the transformers model and tokenizer, the family that maps its modules, where
it was found and how it computes. ``loading.py`` makes one; the capture, the load probe and the analyses read it."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from huggingface_hub import try_to_load_from_cache
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from .families import Family


@dataclass
class LoadedModel:
    """A model ready for capture, with the family that maps its modules and where it was found."""

    source: str
    origin: str  # "local folder", "HF cache", "Hugging Face Hub", "shipped with the project" or a package index copy
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    family: Family
    revision: str | None = None  # the branch, tag or commit asked for (``id@revision``); None: the default
    matmul_dtype: torch.dtype | None = None  # bfloat16 for dtype="bfloat16-matmuls"

    @property
    def config(self):
        return self.model.config

    @property
    def n_layers(self) -> int:
        return self.config.num_hidden_layers

    @property
    def n_heads(self) -> int:
        return self.config.num_attention_heads

    @property
    def n_kv_heads(self) -> int:
        return getattr(self.config, "num_key_value_heads", None) or self.n_heads

    @property
    def max_positions(self) -> int:
        return self.config.max_position_embeddings

    @property
    def display_name(self) -> str:
        """The name pages and links use: a folder's own name, else the source with ``@revision`` if one was asked."""
        if self.origin == "local folder":
            return Path(self.source).name
        return f"{self.source}@{self.revision}" if self.revision else self.source

    @property
    def dtype(self) -> str:
        """How the model computes, as ``load_model`` is asked for it: one of ``compute.DTYPE_NAMES``."""
        if self.matmul_dtype is not None:
            return "bfloat16-matmuls"
        return str(self.model.dtype).removeprefix("torch.")

    @property
    def compute(self) -> str:
        """Where and how the model computes, as the page says it: ``float32 on cpu``, ``bfloat16 on cuda:0``,
        ``float32, bfloat16 matmuls on cpu``."""
        matmuls = "" if self.matmul_dtype is None else ", bfloat16 matmuls"
        return f"{str(self.model.dtype).removeprefix('torch.')}{matmuls} on {self.model.device}"

    @property
    def precision(self) -> torch.dtype:
        """The lowest precision any of the model's results passes through: its matmuls' dtype, else its own."""
        return self.matmul_dtype or self.model.dtype

    @contextmanager
    def computing(self):
        """Where every pass, recomputation and readout runs: without autograd, and with the blocks' matmuls in
        bfloat16 when the model was loaded so, from copies of their weights made at load (``matmul_weights.py``);
        the readout stays in float32 (see ``loading.readout_in_float32``)."""
        with torch.inference_mode(), torch.autocast(self.model.device.type, dtype=self.matmul_dtype or torch.bfloat16,
                                                    enabled=self.matmul_dtype is not None):
            yield

    @property
    def commit(self) -> str | None:
        """The commit the weights were read at (the name of their snapshot folder in the HF cache); None for a
        model that does not come from the Hub."""
        if self.origin not in ("HF cache", "Hugging Face Hub"):
            return None
        return getattr(self.config, "_commit_hash", None) or self.folder.name

    @property
    def folder(self) -> Path:
        """The folder the weights were read from (for a Hub id, its snapshot in the HF cache)."""
        read_from = Path(self.model.name_or_path)
        if read_from.is_dir():
            return read_from
        return Path(try_to_load_from_cache(self.source, "config.json", revision=self.revision)).parent

    def module(self, role: str, layer: int | None = None) -> torch.nn.Module | None:
        """The module that plays a role (see ``families``), or None where the family has no such part."""
        path = self.family.module_path(role, layer)
        return None if path is None else self.model.get_submodule(path)
