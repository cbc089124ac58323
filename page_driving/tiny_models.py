"""Tiny random-init checkpoints saved with ``save_pretrained``, loaded by the tests (and served by the benchmarks)
through the real loading code.

Every norm gets a gain other than 1 and a non-zero bias, and every linear layer a non-zero bias where it has one,
so a value read before a norm's affine step, or a missed bias, cannot pass for the right one.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel, LlamaConfig, MistralConfig,
                          Qwen2Config)

GPT2_TOKENIZER = Path(__file__).resolve().parent.parent / "assets" / "gpt2-tokenizer"


def randomize_norms_and_biases(model: torch.nn.Module, seed: int) -> None:
    """Give every norm a gain away from 1 and every bias a value away from 0."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            is_norm_weight = "ln" in name or "norm" in name
            if is_norm_weight and name.endswith("weight"):
                parameter.copy_(1.0 + 0.5 * torch.rand(parameter.shape, generator=generator))
            elif name.endswith("bias"):
                parameter.copy_(0.2 * torch.randn(parameter.shape, generator=generator))


def save_tiny_gpt2(folder: Path, *, n_layer: int = 3, n_embd: int = 48, n_head: int = 4, n_positions: int = 64,
                   **config) -> Path:
    """A small GPT-2 with GPT-2's real tokenizer, saved as a checkpoint folder."""
    torch.manual_seed(0)
    gpt2_config = GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_positions=n_positions,
                             vocab_size=50257, **config)
    model = GPT2LMHeadModel(gpt2_config)
    randomize_norms_and_biases(model, seed=1)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(GPT2_TOKENIZER).save_pretrained(folder)
    return folder


LLAMA_FAMILY_CONFIGS = {"llama": LlamaConfig, "mistral": MistralConfig, "qwen2": Qwen2Config}


def save_tiny_llama(folder: Path, *, model_type: str = "llama") -> Path:
    """A small grouped-query model of the Llama family (4 query heads sharing 2 key/value heads)."""
    torch.manual_seed(0)
    config = LLAMA_FAMILY_CONFIGS[model_type](
        hidden_size=48, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, vocab_size=50257, bos_token_id=50256, eos_token_id=50256,
        tie_word_embeddings=False,
    )
    model = AutoModelForCausalLM.from_config(config)
    randomize_norms_and_biases(model, seed=2)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(GPT2_TOKENIZER).save_pretrained(folder)
    return folder
