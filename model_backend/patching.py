"""Activation patching: how much of a clean prompt's answer comes back when one value of a corrupted run (one block,
one position, one site) is replaced by the clean run's.

The metric is ``logit[answer] - logit[wrong]`` at the last position. A patch at block i starts from the corrupted
run's captured stream at block i's input (never recomputing earlier blocks) and runs the decoder layers i..end with
the arguments the model itself passed them in the corrupted run (mask, positions, rotary tables), the final norm and
lm_head at the last position only; the positions of one block go through as one batch, leaving out the patches
that change nothing (a clean value bit for bit the corrupted one). ``patched_blocks`` yields
each block's row as soon as it is computed, so a page can draw them as they come and stop between blocks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from .capture import as_numpy, capture_token_ids, first_tensor, to_model
from .errors import PromptError
from .hooks import hook_input, hook_output
from .interventions import changed_output_hook
from .loaded_model import LoadedModel
from .names import full_name
from .readout import token_logits
from .run import Run
from .targets import match_target
from .tokens import encode_prompt

PATCHED_SITES = ("layer_output", "attention_output", "mlp_output")


@dataclass
class BlockCall:
    """The arguments the model passed one decoder layer besides its hidden states (positions, mask, rotary tables)."""

    args: tuple
    kwargs: dict
    hidden_states_by_name: bool

    def __call__(self, layer: torch.nn.Module, stream: torch.Tensor) -> torch.Tensor:
        """The layer on a [batch, seq, hidden] stream, its other arguments expanded to the batch."""
        args, kwargs = for_batch(self.args, len(stream)), for_batch(self.kwargs, len(stream))
        if self.hidden_states_by_name:
            return first_tensor(layer(*args, hidden_states=stream, **kwargs))
        return first_tensor(layer(stream, *args, **kwargs))


def for_batch(value, batch: int):
    """A call argument made for ``batch`` rows: a tensor with a batch axis of one is expanded (no copy)."""
    if isinstance(value, torch.Tensor):
        return value.expand(batch, *value.shape[1:]) if value.dim() >= 2 and value.shape[0] == 1 else value
    if isinstance(value, tuple):
        return tuple(for_batch(item, batch) for item in value)
    if isinstance(value, list):
        return [for_batch(item, batch) for item in value]
    if isinstance(value, dict):
        return {key: for_batch(item, batch) for key, item in value.items()}
    return value


@dataclass
class PatchingPair:
    """A clean and a corrupted run of the same length, the two tokens compared, and how the model called each of its
    decoder layers in the corrupted run."""

    clean: Run
    corrupted: Run
    answer_id: int
    wrong_id: int
    answer: str
    wrong: str
    block_calls: list[BlockCall] = field(repr=False)
    precision: str = "float32"  # how the model computed (``LoadedModel.dtype``): the checks' tolerance depends on it

    @property
    def clean_metric(self) -> float:
        return logit_difference(self.clean.logits_at([-1])[0], self.answer_id, self.wrong_id)

    @property
    def corrupted_metric(self) -> float:
        return logit_difference(self.corrupted.logits_at([-1])[0], self.answer_id, self.wrong_id)


@dataclass(frozen=True)
class PatchedBlock:
    """One block's row: the metric with each site patched at each position, and the block's exactness rows
    (every position of its ``layer_output`` patched, and none)."""

    layer: int
    metrics: dict[str, np.ndarray]  # site -> [seq]
    all_patched: float
    none_patched: float


@dataclass
class Patching:
    """Every block's rows so far, [n_layers, seq] per site (NaN where not computed yet), and the baselines."""

    pair: PatchingPair
    grids: dict[str, np.ndarray]
    all_patched: np.ndarray  # [n_layers]
    none_patched: np.ndarray  # [n_layers]
    blocks_done: int = 0

    @classmethod
    def empty(cls, pair: PatchingPair) -> Patching:
        n_layers, seq = pair.corrupted.n_layers, pair.corrupted.seq_len
        return cls(pair, {site: np.full((n_layers, seq), np.nan, np.float32) for site in PATCHED_SITES},
                   np.full(n_layers, np.nan, np.float32), np.full(n_layers, np.nan, np.float32))

    def with_block(self, block: PatchedBlock) -> Patching:
        """A copy with one more block's row (a page publishes a new object for each row)."""
        grids = {site: grid.copy() for site, grid in self.grids.items()}
        for site, row in block.metrics.items():
            grids[site][block.layer] = row
        all_patched, none_patched = self.all_patched.copy(), self.none_patched.copy()
        all_patched[block.layer], none_patched[block.layer] = block.all_patched, block.none_patched
        return Patching(self.pair, grids, all_patched, none_patched, self.blocks_done + 1)

    @property
    def complete(self) -> bool:
        return self.blocks_done == self.pair.corrupted.n_layers

    @property
    def clean_check(self) -> float:
        """The largest |metric with every position of a block's output patched - clean metric| over the blocks done."""
        return float(np.nanmax(np.abs(self.all_patched - self.pair.clean_metric), initial=0.0))

    @property
    def corrupted_check(self) -> float:
        """The largest |metric with nothing patched - corrupted metric| over the blocks done."""
        return float(np.nanmax(np.abs(self.none_patched - self.pair.corrupted_metric), initial=0.0))

    def normalised(self, site: str) -> np.ndarray:
        """A grid as the share of the clean answer recovered: 0 is the corrupted run, 1 the clean run."""
        return (self.grids[site] - self.pair.corrupted_metric) / (self.pair.clean_metric - self.pair.corrupted_metric)


def logit_difference(logits: np.ndarray, answer_id: int, wrong_id: int) -> float:
    return float(logits[answer_id]) - float(logits[wrong_id])


def patching_pair(loaded: LoadedModel, clean_prompt: str, corrupted_prompt: str, *, bos: bool = False,
                  answer: str | None = None, wrong: str | None = None) -> PatchingPair:
    """Run both prompts, check they have as many tokens, and pick the tokens compared (by default the clean run's
    and the corrupted run's top predictions, the latter's next best where they are one token; a typed token is its
    text's first token)."""
    corrupted_ids = encode_prompt(loaded, corrupted_prompt, bos=bos)
    clean_ids = encode_prompt(loaded, clean_prompt, bos=bos)
    check_same_length(len(clean_ids), len(corrupted_ids))
    clean = capture_token_ids(loaded, clean_ids, prompt=clean_prompt, bos=bos)
    return pair_with_run(loaded, clean, corrupted_prompt, answer=answer, wrong=wrong)


def pair_with_run(loaded: LoadedModel, clean: Run, corrupted_prompt: str, *, answer: str | None = None,
                  wrong: str | None = None) -> PatchingPair:
    """The same pair for a clean run already made (the page's run), the corrupted prompt read with its BOS choice."""
    corrupted_ids = encode_prompt(loaded, corrupted_prompt, bos=clean.bos)
    check_same_length(clean.seq_len, len(corrupted_ids))
    check_some_token_differs(clean.token_ids, corrupted_ids)
    block_calls: list[BlockCall] = [None] * loaded.n_layers
    handles = [hook_input(loaded.module("layer", layer), keep_call(block_calls, layer), with_kwargs=True)
               for layer in range(loaded.n_layers)]
    try:
        corrupted = capture_token_ids(loaded, corrupted_ids, prompt=corrupted_prompt, bos=clean.bos)
    finally:
        for handle in handles:
            handle.remove()
    answer_id = chosen_token(loaded, answer, clean)
    wrong_id = chosen_token(loaded, wrong, corrupted, besides=answer_id)
    return PatchingPair(clean, corrupted, answer_id, wrong_id, loaded.tokenizer.decode([answer_id]),
                        loaded.tokenizer.decode([wrong_id]), block_calls, loaded.dtype)


def check_same_length(n_clean: int, n_corrupted: int) -> None:
    if n_clean != n_corrupted:
        raise PromptError(f"the clean prompt is {n_clean} tokens and the corrupted prompt {n_corrupted}: "
                          "patching needs as many tokens in both")


def check_some_token_differs(clean_ids, corrupted_ids) -> None:
    """Patching two equal prompts recovers nothing: both runs share every value, and the share recovered, divided by
    the clean minus the corrupted metric, would divide by zero."""
    if list(clean_ids) == list(corrupted_ids):
        raise PromptError("the corrupted prompt is the clean prompt, token for token: patching needs at least one "
                          "token swapped (e.g. France → Italy)")


def chosen_token(loaded: LoadedModel, text: str | None, run: Run, besides: int | None = None) -> int:
    """The typed token matched the way the next token is written after the run's prompt ("Paris" is " Paris"), or
    the run's top prediction when none is typed (its next best where the top one is ``besides``: the wrong token is
    never the answer by default). A text of several tokens is refused, naming its pieces."""
    if text:
        match = match_target(loaded, run, text)
        if match.refused:
            raise PromptError(f"“{text}” is not one token here: it is written {' · '.join(match.written.labels)}; "
                              "patching compares two single tokens")
        return match.token_id
    ranked = np.argsort(run.logits_at([-1])[0])[::-1]
    return int(ranked[1] if ranked[0] == besides else ranked[0])


def keep_call(block_calls: list, layer: int):
    """A pre-hook keeping what the model passes a decoder layer besides its hidden states."""
    def keep(_module, args, kwargs):
        by_name = not args
        block_calls[layer] = BlockCall(args[1:], {k: v for k, v in kwargs.items() if k != "hidden_states"}, by_name)
    return keep


def patched_blocks(loaded: LoadedModel, pair: PatchingPair) -> Iterator[PatchedBlock]:
    """Each block's row in turn, block 0 first: one batched pass from that block on."""
    for layer in range(pair.corrupted.n_layers):
        yield patch_block(loaded, pair, layer)


def patch_block(loaded: LoadedModel, pair: PatchingPair, layer: int) -> PatchedBlock:
    """One block's metrics with each site patched at each position, and its exactness rows: the sublayer patches
    run block ``layer`` as one batch, then every row run (the patches that change something, and the two exactness
    rows) the later blocks as one batch. A patch that changes nothing leaves the corrupted run: its metric is the
    corrupted run's, without a pass."""
    changing = {site: changing_positions(pair, site, layer) for site in PATCHED_SITES}
    with loaded.computing():
        streams = torch.cat([sublayer_patched_outputs(loaded, pair, layer, changing),
                             stream_patched_outputs(loaded, pair, layer, changing["layer_output"])])
        computed = last_metrics(loaded, pair, run_blocks(loaded, pair, streams, layer + 1))
    counts = [len(changing[site]) for site in ("attention_output", "mlp_output", "layer_output")]
    attention, mlp, stream, exactness = np.split(computed, np.cumsum(counts))
    metrics = {}
    for site, values in (("attention_output", attention), ("mlp_output", mlp), ("layer_output", stream)):
        metrics[site] = np.full(pair.corrupted.seq_len, pair.corrupted_metric, np.float32)
        metrics[site][changing[site]] = values
    return PatchedBlock(layer, metrics, float(exactness[0]), float(exactness[1]))


def changing_positions(pair: PatchingPair, site: str, layer: int) -> np.ndarray:
    """The positions where patching ``site`` of block ``layer`` can move the metric: where the clean run's value is
    not bit for bit the corrupted run's (before the first swapped token both runs read the same tokens), and in the
    last block the last position only (no later block reads the others)."""
    key = full_name(site, layer)
    positions = np.flatnonzero((pair.clean[key] != pair.corrupted[key]).any(axis=-1))
    return positions[positions == pair.corrupted.seq_len - 1] if layer == pair.corrupted.n_layers - 1 else positions


def stream_patched_outputs(loaded: LoadedModel, pair: PatchingPair, layer: int, positions: np.ndarray) -> torch.Tensor:
    """Block ``layer``'s corrupted output with the n-th of ``positions`` replaced by the clean run's in row n, then
    with every position replaced, then with none: [n + 2, seq, hidden]."""
    key, n = full_name("layer_output", layer), len(positions)
    clean, corrupted = to_model(loaded, pair.clean[key])[0], to_model(loaded, pair.corrupted[key])[0]
    stream = corrupted.expand(n + 2, -1, -1).clone()
    positions = torch.from_numpy(positions)
    stream[torch.arange(n), positions] = clean[positions]
    stream[n] = clean
    return stream


def sublayer_patched_outputs(loaded: LoadedModel, pair: PatchingPair, layer: int,
                             changing: dict[str, np.ndarray]) -> torch.Tensor:
    """Block ``layer``'s output from its corrupted input with the attention's write at the n-th of its changing
    positions replaced by the clean run's in row n, then the MLP's in the rows after those:
    [attention's + MLP's positions, seq, hidden]. What reads the stream after a write reads the patched one."""
    n_attention, n_mlp = len(changing["attention_output"]), len(changing["mlp_output"])
    stream = to_model(loaded, pair.corrupted[full_name("layer_input", layer)])
    if n_attention + n_mlp == 0:
        return stream[:0]
    stream = stream.expand(n_attention + n_mlp, -1, -1).contiguous()
    rows = {"attention_output": torch.arange(n_attention), "mlp_output": torch.arange(n_attention, n_attention + n_mlp)}
    handles = [hook_output(loaded.module(loaded.family.value_reads()[site][0], layer),
                           changed_output_hook(clean_written(loaded, pair, site, layer, rows[site], changing[site])))
               for site in rows if len(changing[site])]
    try:
        return run_blocks(loaded, pair, stream, layer, last=layer + 1)
    finally:
        for handle in handles:
            handle.remove()


def clean_written(loaded: LoadedModel, pair: PatchingPair, site: str, layer: int, rows: torch.Tensor,
                  positions: np.ndarray):
    """A change of a sublayer's [batch, seq, hidden] output: in each of ``rows`` in turn, the next of ``positions``
    takes the clean run's value of ``site``."""
    clean = to_model(loaded, pair.clean[full_name(site, layer)])[0]  # [seq, hidden]
    positions = torch.from_numpy(positions)

    def patch(output: torch.Tensor) -> torch.Tensor:
        output = output.clone()
        output[rows, positions] = clean[positions].to(output.dtype)
        return output
    return patch


def run_blocks(loaded: LoadedModel, pair: PatchingPair, stream: torch.Tensor, first: int,
               last: int | None = None) -> torch.Tensor:
    """A [batch, seq, hidden] stream through decoder layers ``first``..``last`` (exclusive; default: to the end)."""
    for layer in range(first, loaded.n_layers if last is None else last):
        stream = pair.block_calls[layer](loaded.module("layer", layer), stream)
    return stream


def last_metrics(loaded: LoadedModel, pair: PatchingPair, stream: torch.Tensor) -> np.ndarray:
    """The metric of each row of a final stream: final norm, then the answer's and the wrong token's rows of lm_head
    (and any softcap) at the last position."""
    logits = token_logits(loaded, loaded.module("final_norm")(stream[:, -1]), [pair.answer_id, pair.wrong_id])
    return as_numpy(logits[:, 0] - logits[:, 1])


def activation_patching(loaded: LoadedModel, clean_prompt: str, corrupted_prompt: str, *, bos: bool = False,
                        answer: str | None = None, wrong: str | None = None) -> Patching:
    """Every block's rows for a prompt pair, computed to the end (a notebook's or the CLI's call)."""
    return patching_of(loaded, patching_pair(loaded, clean_prompt, corrupted_prompt, bos=bos, answer=answer,
                                             wrong=wrong))


def patching_of(loaded: LoadedModel, pair: PatchingPair) -> Patching:
    """Every block's rows for a pair, computed to the end."""
    patching = Patching.empty(pair)
    for block in patched_blocks(loaded, pair):
        patching = patching.with_block(block)
    return patching
