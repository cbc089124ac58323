"""Lesson 7, activation patching: where the answer is carried, read from the run's own patching grids (the subject
token's stream in early and middle blocks, then the last token's, when the model shows that; else what it shows)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the patching module imports torch; the lesson only reads its arrays
    from model_backend.patching import Patching

CARRIES = 0.5  # a patch "carries the answer" when it brings back at least half of the clean run's logit difference


def changed_positions(patching: Patching) -> list[int]:
    """The positions where the two prompts' tokens differ (the swapped word)."""
    pair = patching.pair
    return [p for p, (a, b) in enumerate(zip(pair.clean.tokens, pair.corrupted.tokens)) if a != b]


def carrying_blocks(recovered: np.ndarray) -> np.ndarray:
    """The blocks whose patch at this position carries the answer."""
    return np.flatnonzero(recovered >= CARRIES)


def block_list(blocks: np.ndarray) -> str:
    """``3-9`` for a run of blocks, ``3, 5, 8`` otherwise, ``none`` for no block."""
    if not blocks.size:
        return "none"
    if blocks[-1] - blocks[0] == blocks.size - 1:
        return f"{blocks[0]}" if blocks.size == 1 else f"{blocks[0]}–{blocks[-1]}"
    return ", ".join(map(str, blocks))


def followed_positions(patching: Patching | None) -> tuple[int, int] | None:
    """The two positions the lesson follows, once every block is patched: the swapped token (of the positions where
    the prompts differ, the one whose stream patched at block 0 brings back the most) and the last token; None where
    the runs' differences are equal or the prompts differ nowhere (no patch brings anything back)."""
    if patching is None or not patching.complete:
        return None
    pair, changed = patching.pair, changed_positions(patching)
    if abs(pair.clean_metric - pair.corrupted_metric) < 1e-6 or not changed:
        return None
    stream = patching.normalised("layer_output")
    return max(changed, key=lambda p: stream[0, p]), pair.corrupted.seq_len - 1


def patching_lesson_paragraphs(patching: Patching | None, n_layers: int, shown) -> list[str]:
    """The lesson's paragraphs for the grids on screen, the one that says where the answer is carried first
    (``shown`` formats a token for HTML)."""
    if patching is None or not patching.complete:
        done = 0 if patching is None else patching.blocks_done
        return [f"Patching each block in turn… {done} of {n_layers} blocks so far."]
    pair = patching.pair
    intro = (f"The clean prompt ends with logit({shown(pair.answer)}) − logit({shown(pair.wrong)}) = "
             f"<b>{pair.clean_metric:.2f}</b>, the corrupted one with <b>{pair.corrupted_metric:.2f}</b>. Each cell "
             "puts one value of the clean run into the corrupted run; its colour is the share of that gap it brings "
             "back.")
    followed = followed_positions(patching)
    if followed is None:
        return [intro, "The two runs give the same difference here, so no patch can bring anything back: change the "
                       "corrupted prompt or the tokens compared."]
    subject, last = followed
    stream = patching.normalised("layer_output")
    at_subject, at_last = carrying_blocks(stream[:, subject]), carrying_blocks(stream[:, last])
    where = (f"Patching the stream at the swapped token {shown(pair.clean.tokens[subject])} (position {subject}) "
             f"brings the answer back in blocks <b>{block_list(at_subject)}</b>; at the last token (position {last}) "
             f"in blocks <b>{block_list(at_last)}</b>.")
    handed_over = (at_subject.size and at_last.size and at_subject[0] == 0 and at_last[-1] == n_layers - 1
                   and at_last[0] <= at_subject[-1] + 2)
    if handed_over:
        story = (f"This is the textbook pattern: up to block {at_subject[-1]} the answer lives in the subject's own "
                 f"stream; from block {at_last[0]} it has been moved to the last token, whose stream makes the "
                 "prediction.")
    else:
        best_block, best_position = np.unravel_index(np.nanargmax(stream), stream.shape)
        story = (f"This is not the clean hand-over of the textbook: the strongest single patch is block "
                 f"<b>{best_block}</b> at position <b>{best_position}</b> ({stream[best_block, best_position]:.2f} "
                 "of the gap).")
    attention, mlp = patching.normalised("attention_output")[:, last], patching.normalised("mlp_output")[:, last]
    movers = (f"Which sublayer writes it into the last token? Attention at block <b>{int(np.argmax(attention))}</b> "
              f"brings back the most there ({np.max(attention):.2f}), the MLP at block <b>{int(np.argmax(mlp))}</b> "
              f"({np.max(mlp):.2f}). " + ("Attention, the only part that moves information between tokens, writes "
                                          "more of it." if np.max(attention) > np.max(mlp) else
                                          "Here an MLP's write at the last token matters more than any attention's."))
    return [where, intro, story, movers]
