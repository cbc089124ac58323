"""The Write tab's work for one page: a generation (or several branches, one seed each) decoded one cached step per
job, so the steps of several pages interleave on the model threads, published as it comes; once it ends (done, or
Stop), the shown branch's prompt and written tokens are captured in one pass and shown in every tab, with the
commitment strip read from that run. A click on a step's alternative continues the shown branch from there."""

from __future__ import annotations

import html
import time
from dataclasses import replace

from layouts.writing_view import PAGE_MAX_NEW_TOKENS, WrittenText
from model_backend import LoadedModel, PromptError
from model_backend.branches import (BranchStart, branch_of, branch_seeds, parting_step, start_branch_from,
                                    start_branches)
from model_backend.commitment import commitment_blocks
from model_backend.generation import Generation, WriteSettings, capture_generation, generate_tokens, generation_of
from model_backend.steered_pass import SteeringVector
from model_backend.steering import Steering, steering_for
from model_backend.steering_size import steering_report
from model_backend.tokens import encode_prompt, token_strings, visible_token

from .analysis import Analysis, analysis_of
from .failures import report_failure
from .prompt_limits import check_page_token_limit


def write_settings(state) -> WriteSettings:
    """The state's write settings, checked (a PromptError says what is out of range)."""
    if not 1 <= state.max_new_tokens <= PAGE_MAX_NEW_TOKENS:
        raise PromptError(f"new tokens must be 1 to {PAGE_MAX_NEW_TOKENS} on this page, not {state.max_new_tokens}")
    if not state.sample:
        return WriteSettings(max_new_tokens=state.max_new_tokens, seed=state.seed)
    return WriteSettings(max_new_tokens=state.max_new_tokens, temperature=state.temperature, top_k=state.top_k,
                         top_p=state.top_p, seed=state.seed)


def asked_steering(state, loaded: LoadedModel) -> Steering | None:
    """The state's steering, checked against the model, or None when it is off."""
    if not state.steer:
        return None
    steering = Steering(state.steer_block, state.steer_toward, state.steer_away, float(state.steer_alpha))
    steering.check_block(loaded)
    return steering


def settings_words(settings: WriteSettings) -> str:
    if settings.greedy:
        return "greedy"
    top_k = "all" if settings.top_k is None else settings.top_k
    top_p = 1 if settings.top_p is None else settings.top_p
    return f"sampled: temperature {settings.temperature:g}, top-k {top_k}, top-p {top_p:g}, seed {settings.seed}"


def steering_words(vector: SteeringVector | None) -> str:
    if vector is None:
        return ""
    return (f"+{vector.alpha:g}·v at block {vector.block}, toward {visible_token(vector.toward)}, away from "
            f"{visible_token(vector.away)}")


def several_tokens_note(loaded: LoadedModel, vector: SteeringVector) -> str:
    """Where a steering text is several tokens, say that its last position is the one read."""
    notes = []
    for side, text in (("toward", vector.toward), ("away from", vector.away)):
        pieces = token_strings(loaded, encode_prompt(loaded, text, bos=False))
        if len(pieces) > 1:
            notes.append(f"{side} {html.escape(visible_token(text))} is {len(pieces)} tokens "
                         f"({html.escape(' '.join(visible_token(piece) for piece in pieces))})")
    if not notes:
        return ""
    return (f"<p class='write-several'>{'; '.join(notes)}: the vector reads the <code>layer_input</code> at its last "
            f"position, after the whole text.</p>")


def written_text(loaded: LoadedModel, generation: Generation, **extra) -> WrittenText:
    """What the view draws of a generation: its tokens decoded, each step's probability and alternatives."""
    prompt_ids = generation.prompt_ids.tolist()
    decoded = token_strings(loaded, [*prompt_ids, *generation.generated_ids.tolist()])
    alternatives = [list(zip(token_strings(loaded, step.top_ids.tolist()), step.top_probs.tolist()))
                    for step in generation.steps]
    return WrittenText(prompt_tokens=decoded[:len(prompt_ids)], tokens=decoded[len(prompt_ids):],
                       probabilities=[step.probability for step in generation.steps], alternatives=alternatives,
                       token_ids=generation.generated_ids.tolist(),
                       alternative_ids=[step.top_ids.tolist() for step in generation.steps],
                       n_layers=loaded.n_layers, settings=settings_words(generation.settings),
                       steering=steering_words(generation.steering), **extra)


def seed_labels(settings: WriteSettings, n_branches: int) -> list[str]:
    """The seeded branches' labels ("seed 3"); one text written alone has none."""
    seeds = branch_seeds(settings, n_branches)
    return [f"seed {seed}" for seed in seeds] if len(seeds) > 1 else [""]


def parting_choices(generations: list[Generation]) -> dict:
    """Where the seeded branches part, and the step the branching buttons open on: that one, else the first."""
    parting = parting_step(generations) if len(generations) > 1 else None
    return {"branch_parting": parting, "branch_step": 1 if parting is None else parting + 1}


def captured_texts(loaded: LoadedModel, generations: list[Generation], labels: list[str], shown: int,
                   blocks: list[int]) -> list[WrittenText]:
    """Every branch as the view draws it once the shown one is captured: that one with its commitment blocks."""
    return [written_text(loaded, generation, label=label, done=True, commitment=blocks if index == shown else None)
            for index, (generation, label) in enumerate(zip(generations, labels))]


def captured_writing(loaded: LoadedModel, generation: Generation, prompt: str, bos: bool, typed_target: str,
                     as_written: bool) -> tuple[Analysis, list[int]]:
    """The prompt and the written tokens in one pass (steered as written), its analysis and each written token's
    commitment block."""
    run = capture_generation(loaded, generation, prompt=prompt, bos=bos)
    check_page_token_limit(loaded, run.seq_len)
    blocks = commitment_blocks(loaded, run, generation.generated_from)
    return analysis_of(loaded, run, typed_target, as_written), [int(block) for block in blocks]


def steering_check(loaded: LoadedModel, prompt_ids: list[int], settings: WriteSettings,
                   vector: SteeringVector) -> tuple[Generation, bool]:
    """The plain continuation, and whether the same steering at α = 0 writes exactly it (the hook adds nothing)."""
    plain = generate_tokens(loaded, prompt_ids, settings)
    zero = generate_tokens(loaded, prompt_ids, settings, replace(vector, alpha=0.0))
    return plain, zero.generated_ids.tolist() == plain.generated_ids.tolist()


class Writer:
    """Writes the prompt's continuation, or its branches, for one page when Write is pressed; Stop, a new Run or
    Write end it, and what was written so far is kept. It keeps every branch's Generation, in the order the page
    lists them."""

    def __init__(self, session):
        self.session, self.state, self.work = session, session.state, session.work
        self.stopping = False
        self.generations: list[Generation] = []
        self.labels: list[str] = []
        self.n_seeded = 0  # the first branches, one per seed; the later ones continue an alternative
        self.state.param.watch(session.launcher(self.write), "write_requested")
        self.state.param.watch(self.stop, "stop_requested")
        self.state.param.watch(session.launcher(self.answer_branch_ask), "branch_ask")

    def stop(self, *_events) -> None:
        self.stopping = True

    def adopt(self, seeded: list[Generation], labels: list[str]) -> None:
        """Take branches written elsewhere (a notebook's call) as this page's, so that their buttons continue them."""
        self.generations, self.labels, self.n_seeded = list(seeded), list(labels), len(seeded)

    async def write(self) -> None:
        """Decode every branch step by step in turn, publishing each token; then capture the first branch's whole
        text once and show it everywhere."""
        state, loaded, publisher = self.state, self.session.loaded, self.session.publisher
        if loaded is None:
            return
        try:
            settings, steering = write_settings(state), asked_steering(state, loaded)
            prompt_ids = encode_prompt(loaded, state.prompt, bos=state.bos)
            check_page_token_limit(loaded, len(prompt_ids) + settings.max_new_tokens)
            labels = seed_labels(settings, state.branches)  # refuses a count out of range
        except PromptError as error:
            report_failure(publisher, error)
            return
        started, self.stopping = time.perf_counter(), False
        job = self.work.start("write", None)
        vector = None
        if steering is not None:
            made = await self.work.run(job, "Making the steering vector…", steering_for, loaded, steering,
                                       bos=state.bos)
            if not made.ran:
                return
            vector = made.value
        decoding = await self.work.run(job, "Starting to write…", start_branches, loaded, prompt_ids, settings,
                                       state.branches, vector)
        if not decoding.ran:
            return
        decoders = decoding.value
        self.generations, self.labels = [], labels

        def written_so_far() -> list[Generation]:
            return [generation_of(decoder) for decoder in decoders]
        if not await self.decode(job, decoders, written_so_far, shown=0):
            return
        self.generations, self.n_seeded = written_so_far(), len(decoders)
        job.publish(**parting_choices(self.generations), branched=[])
        await self.show_written(loaded, job, 0, started)

    async def answer_branch_ask(self) -> None:
        """A click in the branches: show that branch everywhere, or continue the shown one from an alternative."""
        ask = self.state.branch_ask
        if ask is None or self.session.loaded is None or not self.generations:
            return
        if ask.show is not None:
            if 0 <= ask.show < len(self.generations) and ask.show != self.state.shown_branch:
                await self.show_written(self.session.loaded, self.work.start("write", None), ask.show,
                                        time.perf_counter())
            return
        await self.branch_from(min(self.state.shown_branch, len(self.generations) - 1), ask.step, ask.token_id)

    async def branch_from(self, parent_index: int, step: int, token_id: int) -> None:
        """Continue branch ``parent_index`` from ``step`` with the alternative ``token_id``, as a new branch that
        every tab then shows."""
        loaded, parent = self.session.loaded, self.generations[parent_index]
        started, self.stopping = time.perf_counter(), False
        job = self.work.start("write", None)
        start = BranchStart(parent, step, token_id)
        decoding = await self.work.run(job, "Starting the branch…", start_branch_from, loaded, start,
                                       parent.settings)
        if not decoding.ran:
            return
        decoder, kept = decoding.value, list(self.generations)
        shown = len(kept)
        word = visible_token(token_strings(loaded, [token_id])[0])
        self.labels = [*self.labels[:shown], f"{self.labels[parent_index] or 'text'}, step {step + 1} → {word}"]

        def written_so_far() -> list[Generation]:
            return [*kept, branch_of(start, decoder, parent.settings)]
        if not await self.decode(job, [] if decoder is None else [decoder], written_so_far, shown):
            return
        self.generations = written_so_far()
        job.publish(branched=[*self.state.branched, (parent_index, step, token_id)])
        await self.show_written(loaded, job, shown, started)

    async def write_from_link(self) -> None:
        """A link's text written again: the same settings write the same branches, then the link's continued
        branches are continued again, each from its parent's same step and alternative."""
        branched = list(self.state.branched)
        await self.write()
        for parent_index, step, token_id in branched:
            if not (parent_index < len(self.generations) and step < len(self.generations[parent_index].steps)
                    and token_id in self.generations[parent_index].steps[step].top_ids):
                self.session.publisher.update(url_note="the link's branches do not fit what was written; they are "
                                                       "left out")
                return
            await self.branch_from(parent_index, step, token_id)

    async def decode(self, job, decoders: list, written_so_far, shown: int) -> bool:
        """Step the decoders in turn until each is done or Stop is pressed, publishing the texts after each step;
        False when the job was superseded. The busy line says one thing for the whole text, so that a step sends
        the page its new token alone (the Write tab counts the tokens)."""
        doing = "Writing…"
        with self.session.publisher.showing(doing):
            while not self.stopping and not all(decoder.done for decoder in decoders):
                for decoder in decoders:
                    if decoder.done or self.stopping:
                        continue
                    step = await self.work.run(job, doing, decoder.step)
                    if not (step.ran and job.current):
                        return False
                    self.publish_texts(job, written_so_far(), shown, message="", write_check="")
        return True

    def publish_texts(self, job, generations: list[Generation], shown: int, **values) -> None:
        """The shown branch as the Write tab's text, and every branch's row when there are several."""
        loaded = self.session.loaded
        texts = [written_text(loaded, generation, label=label) for generation, label in zip(generations, self.labels)]
        job.publish(writing=texts[shown], branch_texts=texts if len(texts) > 1 else [], shown_branch=shown, **values)

    async def show_written(self, loaded: LoadedModel, job, shown: int, started: float) -> None:
        """Capture the shown branch's text in one pass, show it in every tab and colour the commitment strip; when
        steered, write the plain continuation beside it and check that α = 0 writes exactly that."""
        generation = self.generations[shown]
        if not generation.steps:
            return
        state = self.state
        captured = await self.work.run(job, "Capturing the written text in one pass…", captured_writing, loaded,
                                       generation, state.prompt, state.bos, self.session.typed_target(),
                                       self.session.target_as_written())
        if not (captured.ran and job.current):
            return
        analysis, blocks = captured.value
        note = f"{len(generation.generated_ids)} written" + (f" · {self.labels[shown]}" if len(self.generations) > 1
                                                               else "")
        if generation.steering is not None:
            report = steering_report(analysis.run, generation.steering)
            note += (f" · steered: +{generation.steering.alpha:g}·v at block {report.block}, |α·v| = "
                     f"{report.vector_norm:.1f}, {report.ratio:.2f}× the stream's median norm there")
        self.session.show_analysis(loaded, job, analysis, started, note=note)
        texts = captured_texts(loaded, self.generations, self.labels, shown, blocks)
        written = texts[shown]
        job.publish(writing=written, branch_texts=texts if len(texts) > 1 else [], shown_branch=shown)
        if generation.steering is None or shown >= self.n_seeded:  # a continued branch has no plain twin
            return
        checked = await self.work.run(job, "Writing the plain continuation to compare…", steering_check, loaded,
                                      generation.prompt_ids.tolist(),
                                      replace(generation.settings, max_new_tokens=len(generation.generated_ids)),
                                      generation.steering)
        if not checked.ran:
            return
        plain, zero_is_plain = checked.value
        plain_tokens = token_strings(loaded, plain.generated_ids.tolist())
        verdict = "holds" if zero_is_plain else "FAILS"
        job.publish(writing=replace(written, plain=plain_tokens),
                    write_check=f"<p class='write-check'>Check: the same steering at α = 0 writes exactly the plain "
                                f"continuation: <b>{verdict}</b> ({len(plain_tokens)} tokens compared).</p>"
                                + several_tokens_note(loaded, generation.steering))
