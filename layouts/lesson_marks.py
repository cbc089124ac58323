"""What each lesson step highlights, figure by figure, from the same numbers its text quotes: the pinned block,
the sink, position 0 and the token followed, the lens cell where the answer first tops, the largest bars, the
blocks whose scaling moves the answer most and least, and the patched columns of the swapped and the last token."""

from __future__ import annotations

import numpy as np

from .lesson_text import LessonInputs, earliest_decided, last_position_ranks, scaling_changes
from .patching_lesson import followed_positions


def mark(at, label: str) -> dict:
    return {"at": at, "label": label}


def block_marks(inputs: LessonInputs) -> dict:
    """Lesson 1: the open block, whose card the step pins."""
    return {"block_diagram": [mark(f"block.{inputs.layer}", "lesson: pinned")]}


def sink_position(inputs: LessonInputs) -> tuple[int, str]:
    """The first sink detect_sinks found, else position 0 (the one the text measures), and what to call it."""
    if inputs.sinks is not None and inputs.sinks.sinks:
        return inputs.sinks.sinks[0].position, "lesson: the sink"
    return 0, "lesson: position 0, no sink"


def sink_marks(inputs: LessonInputs) -> dict:
    """Lesson 2: the sink's column in the norms heatmap and its line."""
    position, label = sink_position(inputs)
    return {"norms_heatmap": [mark(position, label)], "norms_lines": [mark(position, label)]}


def cosine_marks(inputs: LessonInputs) -> dict:
    """Lesson 3: position 0's row and column among the tokens of a block, and the last token's embedding row across
    the boundaries (the cells the text quotes)."""
    last = inputs.run.seq_len - 1
    return {"similarity_within_layer": [mark(0, "lesson: position 0")],
            "similarity_across_layers": [mark(last, "lesson: its embedding vs each block")]}


def lens_marks(inputs: LessonInputs) -> dict:
    """Lesson 4: the cell where the target first becomes top-1 at the last position, and the last row (the output)."""
    read = last_position_ranks(inputs)
    if read is None:
        return {}
    output = mark((inputs.lens.n_rows - 1, None), "lesson: output row")
    on_top = np.flatnonzero(read[0] == 1)
    if not on_top.size:
        return {"logit_lens": [output]}
    first = int(on_top[0])
    return {"logit_lens": [mark((first, inputs.run.seq_len - 1), "lesson: first top-1"), output]}


def attribution_marks(inputs: LessonInputs) -> dict:
    """Lesson 5: the three largest bars the text names, largest first."""
    if inputs.attribution is None:
        return {}
    labels, terms = inputs.attribution.bars()
    largest = np.argsort(terms)[::-1][:3]
    return {"logit_attribution": [mark(labels[i], f"lesson: #{rank + 1}") for rank, i in enumerate(largest)]}


def intervention_marks(inputs: LessonInputs) -> dict:
    """Lesson 6: the block whose scaling moves the answer most, and the last block's point on the clean line."""
    sweep, n_layers = inputs.sweep, inputs.run.n_layers
    if sweep is None or len(sweep.scaled_logprobs) < n_layers:
        return {}
    most = scaling_changes(sweep, n_layers)[1]
    return {"intervention": [mark(most, f"lesson: block {most}, moves it most"),
                             mark(n_layers - 1, "lesson: last block, no change")]}


def patching_marks(inputs: LessonInputs) -> dict:
    """Lesson 7: the stream grid's columns of the swapped token and of the last token, whose blocks its text names."""
    followed = followed_positions(inputs.patching)
    if followed is None:
        return {}
    swapped, last = followed
    return {"patching_layer_output": [mark(swapped, "lesson: swapped token"), mark(last, "lesson: last token")]}


def writing_marks(inputs: LessonInputs) -> dict:
    """Lesson 8: the written token decided at the earliest block, on the commitment strip."""
    writing = inputs.writing
    earliest = None if writing is None or not writing.done else earliest_decided(writing)
    if earliest is None:
        return {}
    return {"commitment_strip": [mark(earliest, f"lesson: decided at block {writing.commitment[earliest]}")]}


MARKS = (block_marks, sink_marks, cosine_marks, lens_marks, attribution_marks, intervention_marks, patching_marks,
         writing_marks)


def lesson_marks(step: int, inputs: LessonInputs) -> dict:
    """Figure name -> the marks lesson ``step`` (1 to 8) highlights there for this run."""
    return MARKS[step - 1](inputs)
