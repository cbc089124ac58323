"""One forward pass with torch hooks that keeps every named value of the residual stream.

Each residual-width value is copied once, into an array of its own; a block's output and the next block's input
share one. Keeping the model's own tensors alive instead would stop the allocator from reusing their memory, and on
a 1024-token GPT-2 pass that cost eight times the page faults and a quarter more time than the copies do. One
buffer for all of a pass's values, allocated before it, is as large as a pass's activations several times over:
the C library maps such a block afresh for every pass, and each of its pages faults on first touch, while arrays of
one value each reuse the memory of the runs freed before (``benchmarks/capture_benchmark.py`` times the capture).
The attention pattern is reduced in its hook to what the sink analysis needs (the attention each key receives), and
recomputed in full only when asked for (see ``Run.attention_probabilities``).
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import torch

from .hooks import hook_input, hook_output
from .loaded_model import LoadedModel
from .names import VALUES_BY_NAME, full_name
from .readout import unembed
from .run import Run
from .steered_pass import SteeringVector, steered
from .tokens import check_fits, encode_prompt, sequence_strings

NOT_HOOKED = ("logits", "attention_probabilities")  # computed when first read (Run.logits, Run.attention_probabilities)


def capture_run(loaded: LoadedModel, prompt: str, *, bos: bool = False, steering: SteeringVector | None = None,
                ) -> Run:
    """Run ``prompt`` through the model once and return every standardized value it computed (``steering``: with
    that vector added to its block's input, see ``steering.py``)."""
    return capture_token_ids(loaded, encode_prompt(loaded, prompt, bos=bos), prompt=prompt, bos=bos,
                             steering=steering)


def capture_token_ids(loaded: LoadedModel, token_ids: list[int], *, prompt: str = "", bos: bool = False,
                      steering: SteeringVector | None = None, generated_from: int | None = None) -> Run:
    """The same capture for token ids already made (a benchmark, a researcher's own tokenization, or a prompt and
    what the model wrote after it from ``generated_from`` on)."""
    run = capture_batch(loaded, [token_ids], prompts=[prompt], bos=[bos], steering=steering)[0]
    run.generated_from = generated_from
    return run


def capture_batch(loaded: LoadedModel, token_lists: list[list[int]], *, prompts: list[str] | None = None,
                  bos: list[bool] | None = None, steering: SteeringVector | None = None) -> list[Run]:
    """Several prompts' captures from one pass: their token ids right-padded into one batch with an attention mask,
    so that each row's positions and mask are those of its pass alone, then cut into one Run each.

    A batch multiplies larger matrices than its rows alone, so its sums may round differently: a row's values equal
    its lone pass's to float32 rounding (to bfloat16 rounding with bfloat16 matmuls), and every identity within a
    row holds exactly, each row's values being one pass's own.
    """
    lengths = [len(token_ids) for token_ids in token_lists]
    for length in lengths:
        check_fits(loaded, length)
    recorder = _Recorder(loaded, lengths)
    device = loaded.model.device
    width = max(lengths)
    padded = torch.tensor([token_ids + [0] * (width - len(token_ids)) for token_ids in token_lists], device=device)
    # A lone pass gets no mask: the model's own causal mask is its mask.
    mask = None if len(lengths) == 1 else (torch.arange(width) < torch.tensor(lengths)[:, None]).long().to(device)
    started = time.perf_counter()
    # The steering hook is registered first, so that the capture's hooks read the block's input it changed.
    with loaded.computing(), steered(loaded, steering), recorder.hooked():
        # lm_head runs for the last position only: the full [seq, vocab] logits cost a fifth of a GPT-2 pass, and
        # ``Run.logits`` computes them from final_norm_output with the same module when first read.
        loaded.model(input_ids=padded, attention_mask=mask, use_cache=False, logits_to_keep=1)
    seconds = time.perf_counter() - started
    return [Run(
        model_name=loaded.display_name,
        prompt=(prompts or [""] * len(lengths))[row],
        bos=(bos or [False] * len(lengths))[row],
        token_ids=np.asarray(token_lists[row], dtype=np.int64),
        tokens=sequence_strings(loaded, token_lists[row]),
        values=recorder.values[row],
        attention_column_sums=np.stack(recorder.column_sums[row]),
        attention_diagonal=np.stack(recorder.diagonals[row]),
        value_norms=np.stack(recorder.value_norms[row]),
        n_layers=loaded.n_layers,
        n_heads=loaded.n_heads,
        n_kv_heads=loaded.n_kv_heads,
        vocab_size=loaded.module("lm_head").out_features,
        layer_value_names=tuple(n for n in loaded.family.value_reads() if VALUES_BY_NAME[n].per_layer),
        seconds=seconds,
        recompute_pattern=recorder.pattern_recomputer(row),
        read_logits=logits_reader(loaded, recorder.values[row]["final_norm_output"]),
        steering=steering,
    ) for row in range(len(lengths))]


def logits_reader(loaded: LoadedModel, final_norm_output: np.ndarray):
    """A function giving the logits at some positions: lm_head (and any softcap) on final_norm_output, as the model
    does."""
    def read(positions) -> np.ndarray:
        with loaded.computing():
            return as_numpy(unembed(loaded, to_model(loaded, final_norm_output[positions]))[0])
    return read


def to_model(loaded: LoadedModel, array: np.ndarray) -> torch.Tensor:
    """A captured [seq, ...] array as a [1, seq, ...] tensor on the model's device in its compute dtype."""
    return torch.from_numpy(array)[None].to(device=loaded.model.device, dtype=loaded.model.dtype)


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A tensor as float32 numpy on the CPU, whatever the model's device and compute dtype."""
    return tensor.detach().to(device="cpu", dtype=torch.float32).numpy()


def first_tensor(value) -> torch.Tensor:
    """A module's main tensor: itself, or the first element of the tuple some modules return."""
    return value if isinstance(value, torch.Tensor) else value[0]


class _Recorder:
    """Registers the capture hooks for one pass of one or more right-padded rows and collects what they read, row by
    row, each cut to its own length."""

    def __init__(self, loaded: LoadedModel, lengths: list[int]):
        self.loaded, self.lengths = loaded, lengths
        self.values: list[dict[str, np.ndarray]] = [{} for _ in lengths]
        reads = loaded.family.value_reads()
        self.layer_reads = {n: read for n, read in reads.items() if VALUES_BY_NAME[n].per_layer and n not in NOT_HOOKED}
        self.model_reads = {n: read for n, read in reads.items() if not VALUES_BY_NAME[n].per_layer
                            and n not in NOT_HOOKED}
        self.last_kept: tuple[torch.Tensor, list[np.ndarray]] | None = None
        # [row][layer]
        self.column_sums: list[list[np.ndarray]] = [[None] * loaded.n_layers for _ in lengths]
        self.diagonals: list[list[np.ndarray]] = [[None] * loaded.n_layers for _ in lengths]
        self.value_norms: list[list[np.ndarray]] = [[None] * loaded.n_layers for _ in lengths]
        self.attention_calls: list[list[tuple[tuple, dict]]] = [[None] * loaded.n_layers for _ in lengths]

    def rows(self, tensor: torch.Tensor):
        """Each row of a [batch, seq, ...] tensor cut to its own length, with its index (a [1, seq, ...] tensor, such as
        GPT-2's position embeddings, is every row's)."""
        for row, length in enumerate(self.lengths):
            yield row, tensor.detach()[row if tensor.shape[0] > 1 else 0, :length]

    @contextmanager
    def hooked(self):
        handles = []
        try:
            for name, (role, side) in self.model_reads.items():
                handles += self._hook_value(full_name(name), role, side, None)
            for layer in range(self.loaded.n_layers):
                for name, (role, side) in self.layer_reads.items():
                    handles += self._hook_value(full_name(name, layer), role, side, layer)
                handles.append(hook_output(self.loaded.module("attention", layer), self._attention_reader(layer),
                                           with_kwargs=True))
                handles.append(hook_output(self.loaded.module("value_projection", layer),
                                           self._value_norm_reader(layer)))
            yield self
        finally:
            for handle in handles:
                handle.remove()

    def _hook_value(self, key: str, role: str, side: str, layer: int | None) -> list:
        """Hook the module a value is read at (its input or output) to keep it under ``key``."""
        module = self.loaded.module(role, layer)
        if side == "input":
            def read_input(_module, args, kwargs):
                self.store(key, self.keep(args[0] if args else kwargs["hidden_states"]))
            return [hook_input(module, read_input, with_kwargs=True)]

        def read_output(_module, _args, output):
            self.store(key, self.keep(first_tensor(output)))
        return [hook_output(module, read_output)]

    def store(self, key: str, arrays: list[np.ndarray]) -> None:
        for values, array in zip(self.values, arrays):
            values[key] = array

    def keep(self, tensor: torch.Tensor) -> list[np.ndarray]:
        """Copy each row of a [batch, seq, hidden] value to float32 on the CPU, whatever the model computes in;
        return them as numpy.

        A block's input is the tensor the previous block returned, read just before: it shares that copy.
        """
        if self.last_kept is not None and self.last_kept[0] is tensor:
            return self.last_kept[1]
        kept = [part.to(device="cpu", dtype=torch.float32, copy=True).numpy() for _, part in self.rows(tensor)]
        self.last_kept = (tensor, kept)
        return kept

    def _attention_reader(self, layer: int):
        """Keep each row's mask and positions for recomputation, and reduce its pattern to per-key sums."""
        def read(_module, args, kwargs, output):
            call = (args[1:], {k: v for k, v in kwargs.items() if k != "hidden_states"})
            batch = len(self.lengths)
            for row, length in enumerate(self.lengths):
                pattern = output[1][row, :, :length, :length]  # [heads, query, key], the padding left out
                self.column_sums[row][layer] = as_numpy(pattern.sum(dim=1, dtype=torch.float32))
                self.diagonals[row][layer] = as_numpy(pattern.diagonal(dim1=1, dim2=2)).copy()
                self.attention_calls[row][layer] = call if batch == 1 else call_of_row(call, row, length, batch)
        return read

    def _value_norm_reader(self, layer: int):
        """Norm of every head's value vector at every position, from the projection that makes the values."""
        def read(_module, _args, output):
            for row, projected in self.rows(output):
                per_head = values_per_head(self.loaded, projected)  # [seq, kv_heads, head_dim]
                self.value_norms[row][layer] = as_numpy(per_head.float().norm(dim=-1).T)  # [kv_heads, seq]
        return read

    def pattern_recomputer(self, row: int):
        """A function that rebuilds one block's pattern from a row's stored input with the same modules and mask."""
        loaded, values, calls = self.loaded, self.values[row], self.attention_calls[row]

        def recompute(layer: int) -> np.ndarray:
            layer_input = to_model(loaded, values[full_name("layer_input", layer)])
            args, kwargs = calls[layer]
            norm = loaded.module("attention_norm", layer)  # none in a post-norm block: attention reads the stream
            with loaded.computing():
                _, pattern = loaded.module("attention", layer)(layer_input if norm is None else norm(layer_input),
                                                               *args, **kwargs)
            return as_numpy(pattern[0])
        return recompute


def call_of_row(call: tuple[tuple, dict], row: int, length: int, batch: int) -> tuple[tuple, dict]:
    """An attention call's arguments for one row of a padded batch, as its pass alone would have them: each tensor
    with a batch axis cut to the row, a 4-D mask to the row's queries and keys, a positional tensor (positions,
    rotary angles: [seq] or [batch, seq, ...]) to the row's positions. Copies, so that the batch's are freed."""
    def cut(value):
        if isinstance(value, (tuple, list)):
            return type(value)(cut(part) for part in value)
        if not isinstance(value, torch.Tensor):
            return value
        if value.dim() > 1 and value.shape[0] == batch:
            value = value[row : row + 1]
        if value.dim() == 4:
            return value[..., :length, :length].clone()
        return (value[:length] if value.dim() == 1 else value[:, :length]).clone()
    args, kwargs = call
    return cut(args), {name: cut(value) for name, value in kwargs.items()}


def values_per_head(loaded: LoadedModel, projected: torch.Tensor) -> torch.Tensor:
    """The values [seq, kv_heads, head_dim] cut from the value projection's [seq, width] output, by its layout:
    all of it (separate), the block after the queries and keys (fused), or each head's last third (interleaved)."""
    layout, n_kv_heads = loaded.family.values_layout, loaded.n_kv_heads
    if layout == "interleaved":  # [q_h k_h v_h] for each head h in turn (GPT-NeoX)
        return projected.unflatten(-1, (n_kv_heads, -1)).chunk(3, dim=-1)[2]
    if layout == "fused":  # [q_0..q_H k_0..k_KV v_0..v_KV] (GPT-2's c_attn, Phi-3's qkv_proj)
        head_dim = projected.shape[-1] // (loaded.n_heads + 2 * n_kv_heads)
        projected = projected[..., (loaded.n_heads + n_kv_heads) * head_dim:]
    return projected.unflatten(-1, (n_kv_heads, -1))
