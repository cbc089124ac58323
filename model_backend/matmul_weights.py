"""Bfloat16 copies of the blocks' matrix weights, made once at load, for the bfloat16-matmul mode (``compute.py``).

Autocast casts every float32 weight to bfloat16 at every matmul, and its cast cache lasts one autocast region only:
each pass cast all the blocks' weights again. Here each linear layer of a block (``nn.Linear``, GPT-2's ``Conv1D``)
keeps bfloat16 copies of its weight and bias; inside autocast its forward multiplies with them, which autocast
leaves as they are, so every product is bit for bit the one autocast made from the float32 weights. Outside
autocast (the attribution's float32 split of the heads, a notebook's own call) it multiplies the float32 weights as
before: the float32 parameters stay, for every reader of ``module.weight``, at the cost of the copies' memory
(half the matrices' float32 size). ``benchmarks/capture_benchmark.py --cast-once`` measures what the copies save.
"""

from __future__ import annotations

import torch
from torch.nn import functional
from transformers.pytorch_utils import Conv1D


def keep_bfloat16_matrices(blocks: list[torch.nn.Module], dtype: torch.dtype) -> int:
    """Give every linear layer inside ``blocks`` its ``dtype`` copies; returns how many layers got one (a layer
    offloaded by ``device="auto"``, whose weight is read in only for its own call, keeps autocast's cast)."""
    layers = [module for block in blocks for module in block.modules()
              if isinstance(module, (torch.nn.Linear, Conv1D)) and module.weight.device.type != "meta"]
    for layer in layers:
        multiply_kept_copy_under_autocast(layer, dtype)
    return len(layers)


def multiply_kept_copy_under_autocast(layer: torch.nn.Module, dtype: torch.dtype) -> None:
    """Replace ``layer``'s forward by one that, inside an autocast region of ``dtype``, multiplies ``dtype`` copies
    of its weight and bias made now, and elsewhere runs the float32 forward it had."""
    weight = layer.weight.detach().to(dtype)
    bias = None if layer.bias is None else layer.bias.detach().to(dtype)
    device_type, float_forward = layer.weight.device.type, layer.forward
    conv1d = isinstance(layer, Conv1D)

    def forward(x: torch.Tensor) -> torch.Tensor:
        if not (torch.is_autocast_enabled(device_type) and torch.get_autocast_dtype(device_type) == dtype):
            return float_forward(x)
        if conv1d:  # Conv1D's own forward: bias + x @ weight, its weight stored [in, out]
            return torch.addmm(bias, x.view(-1, x.size(-1)), weight).view(*x.shape[:-1], weight.shape[1])
        return functional.linear(x, weight, bias)

    layer.forward = forward
    layer.kept_matmul_weight = weight  # for a reader that wants to see the copy (tests, memory counts)
