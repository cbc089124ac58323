"""The guided lessons' wiring: each step opens the view it talks about (tab, pinned card, block, token, prompt),
and its text is filled from the run on screen and the results its views computed, off the event loop."""

from __future__ import annotations

import asyncio

from layouts.lesson_marks import lesson_marks
from layouts.lesson_text import IDENTITY_BLOCK, LessonInputs, lesson_text
from layouts.corrupted_prompt import corrupted_version
from layouts.state import DEFAULT_PROMPT
from model_backend import capture_run, detect_sinks
from model_backend.tokens import next_token_probabilities, token_strings

from .failures import report_failure

LESSON_TABS = ("Block diagram", "Norms & sinks", "Cosine similarity", "Logit lens", "Logit attribution",
               "Intervention", "Patching", "Write")
# What a lesson's text reads: a change of any of these writes it again.
LESSON_READS = ["lesson", "run", "sinks", "lens", "attribution", "sweep", "layer", "patching", "writing"]


def step_settings(step: int, state, predicted_target: str) -> dict:
    """What lesson ``step`` sets on the page: its tab, and what its view must show (the run's own sizes, once known)."""
    run = state.run
    settings = {"shown_tab": LESSON_TABS[step - 1]}
    if step == 1:
        layer = min(IDENTITY_BLOCK, run.n_layers - 1) if run else IDENTITY_BLOCK
        card = f"block.{layer}"
        settings.update(layer=layer, pinned=state.pinned if card in state.pinned else [*state.pinned, card])
    elif step == 2:
        settings.update(bos=bool(state.bos_token) or state.bos, token=0)
    elif step == 3 and run is not None:
        settings.update(token=run.seq_len - 1, layer=run.n_layers // 2)
    elif step == 4:
        # The France prompt's answer is the story; an empty target box is filled by the next run's top prediction.
        settings.update(prompt=DEFAULT_PROMPT, raw_lens=False,
                        target=predicted_target if state.prompt == DEFAULT_PROMPT else "")
    elif step == 5:
        settings.update(attribution_position=-1)
    elif step == 8:  # the France prompt written steered, the default steering clamped to the model's blocks
        block = state.param.steer_block.default
        settings.update(prompt=DEFAULT_PROMPT, steer=True, sample=False,
                        steer_block=min(block, run.n_layers - 1) if run else block)
    elif step == 7:  # France against Italy, each run's own top prediction compared
        settings.update(prompt=DEFAULT_PROMPT, corrupted_prompt=corrupted_version(DEFAULT_PROMPT), patch_answer="",
                        patch_wrong="")
    return settings


def prediction_of(loaded, run) -> tuple[str, float, int]:
    """The model's top next token after the prompt, its probability and the vocabulary's size."""
    probabilities = next_token_probabilities(run)
    best = int(probabilities.argmax())
    return token_strings(loaded, [best])[0], float(probabilities[best]), len(probabilities)


def other_bos_run(loaded, run):
    """The same prompt with the BOS switch the other way, and its sinks (lesson 2 compares the two)."""
    other = capture_run(loaded, run.prompt, bos=not run.bos)
    return other, detect_sinks(other)


class LessonGuide:
    """Opens each lesson step's view and keeps the step's text filled with the current run's numbers."""

    def __init__(self, session):
        self.session, self.state = session, session.state
        self.other_bos: tuple = (None, None)  # (the run it belongs to, the pass with BOS switched: a Task)
        self.texts_asked = 0
        self.state.param.watch(self.open_step, "lesson")
        self.state.param.watch(session.launcher(self.write_text), LESSON_READS)
        if self.state.lesson:  # a shared link's step: its prompt, block and cards are in the link already
            tab = LESSON_TABS[self.state.lesson - 1]
            session.publisher.apply(lambda: setattr(self.state, "shown_tab", tab))

    def open_step(self, *_events) -> None:
        """Set what the new step needs (asked from a click, inside the document's lock); a changed prompt or BOS
        runs again, once."""
        state, step = self.state, self.state.lesson
        if step == 0:
            state.param.update(lesson_text="", highlight={})
            return
        settings = step_settings(step, state, self.session.predicted_target)
        changed = {key for key in ("prompt", "bos") if key in settings and settings[key] != getattr(state, key)}
        state.param.update(lesson_text="", highlight={}, **settings)
        if changed == {"prompt"}:  # a changed BOS switch runs the prompt by itself
            state.param.trigger("run_requested")
        if step == 8:  # written after the run just asked for, if any
            state.param.trigger("write_requested")

    async def other_bos_pass(self, loaded, run) -> tuple:
        """The run's prompt with BOS switched, and its sinks (None, None if it failed): one pass per run, shared by
        every text written for it."""
        if self.other_bos[0] is not run:
            doing = "Running the prompt with BOS switched for the lesson…"
            self.other_bos = (run, asyncio.ensure_future(self.session.work.run("lesson-bos", doing, other_bos_run,
                                                                                 loaded, run)))
        done = await asyncio.shield(self.other_bos[1])
        return done.value if done.ran else (None, None)

    async def write_text(self) -> None:
        """Write the step's text for the run on screen; a later request's text wins over an earlier one's."""
        self.texts_asked += 1
        asked = self.texts_asked
        state, loaded = self.state, self.session.loaded
        step, run = state.lesson, state.run
        if step == 0 or run is None or loaded is None:
            return
        other_run, other_sinks = await self.other_bos_pass(loaded, run) if step == 2 else (None, None)
        predicted = await self.session.work.run("lesson", "Writing the lesson…", prediction_of, loaded, run)
        if not predicted.ran:
            return
        prediction, probability, vocabulary = predicted.value
        inputs = LessonInputs(run, state.sinks, prediction, probability, vocabulary, state.layer,
                              other_bos_run=other_run, other_bos_sinks=other_sinks, lens=state.lens,
                              target=state.target_match.followed.labels[0] if state.target_match else state.target,
                              attribution=state.attribution, sweep=state.sweep, patching=state.patching,
                              writing=state.writing)
        try:
            text, marks = await asyncio.to_thread(lambda: (lesson_text(step, inputs), lesson_marks(step, inputs)))
        except Exception as error:  # noqa: BLE001 - shown on the page, which stays usable
            report_failure(self.session.publisher, error)
            return
        if asked != self.texts_asked:
            return

        def show() -> None:  # checked under the document's lock: a click may have opened another step meanwhile
            if state.run is run and state.lesson == step:
                state.param.update(lesson_text=text, highlight=marks)
        self.session.publisher.apply(show)
