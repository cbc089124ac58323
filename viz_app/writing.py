"""The Write tab's work for one page: a generation decoded one cached step per job (so the steps of several pages
interleave on the model threads), published as it comes; once it ends (done, or Stop), the prompt and the written
tokens are captured in one pass and shown in every tab, with the commitment strip read from that run."""

from __future__ import annotations

import time
from dataclasses import replace

from layouts.writing_view import PAGE_MAX_NEW_TOKENS, WrittenText
from model_backend import LoadedModel, PromptError
from model_backend.commitment import commitment_blocks
from model_backend.generation import (Generation, WriteSettings, capture_generation, generate_tokens, generation_of,
                                      start_decoding)
from model_backend.steered_pass import SteeringVector
from model_backend.steering import Steering, steering_for, steering_report
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
    return (f"sampled: temperature {settings.temperature:g}, top-k {settings.top_k}, top-p {settings.top_p:g}, "
            f"seed {settings.seed}")


def steering_words(vector: SteeringVector | None) -> str:
    if vector is None:
        return ""
    return (f"+{vector.alpha:g}·v at block {vector.block}, toward {visible_token(vector.toward)}, away from "
            f"{visible_token(vector.away)}")


def written_text(loaded: LoadedModel, prompt_ids: list[int], generation: Generation, **extra) -> WrittenText:
    """What the view draws of a generation: its tokens decoded, each step's probability and alternatives."""
    decoded = token_strings(loaded, [*prompt_ids, *generation.generated_ids.tolist()])
    alternatives = [list(zip(token_strings(loaded, step.top_ids.tolist()), step.top_probs.tolist()))
                    for step in generation.steps]
    return WrittenText(prompt_tokens=decoded[:len(prompt_ids)], tokens=decoded[len(prompt_ids):],
                       probabilities=[step.probability for step in generation.steps], alternatives=alternatives,
                       n_layers=loaded.n_layers, settings=settings_words(generation.settings),
                       steering=steering_words(generation.steering), **extra)


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
    """Writes the prompt's continuation for one page when Write is pressed; Stop, a new Run or Write end it, and what
    was written so far is kept."""

    def __init__(self, session):
        self.session, self.state, self.work = session, session.state, session.work
        self.stopping = False
        self.state.param.watch(session.launcher(self.write), "write_requested")
        self.state.param.watch(self.stop, "stop_requested")

    def stop(self, *_events) -> None:
        self.stopping = True

    async def write(self) -> None:
        """Decode step by step, publishing each token; then capture the whole text once and show it everywhere."""
        state, loaded, publisher = self.state, self.session.loaded, self.session.publisher
        if loaded is None:
            return
        try:
            settings, steering = write_settings(state), asked_steering(state, loaded)
            prompt_ids = encode_prompt(loaded, state.prompt, bos=state.bos)
            check_page_token_limit(loaded, len(prompt_ids) + settings.max_new_tokens)
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
        decoding = await self.work.run(job, "Starting to write…", start_decoding, loaded, prompt_ids, settings,
                                       vector)
        if not decoding.ran:
            return
        decoder = decoding.value
        while not (decoder.done or self.stopping):
            step = await self.work.run(job, f"Writing token {len(decoder.steps) + 1} of {settings.max_new_tokens}…",
                                       decoder.step)
            if not (step.ran and job.current):
                return
            job.publish(writing=written_text(loaded, prompt_ids, generation_of(decoder)), write_check="",
                        message="")
        await self.show_written(loaded, job, prompt_ids, generation_of(decoder), started)

    async def show_written(self, loaded: LoadedModel, job, prompt_ids: list[int], generation: Generation,
                           started: float) -> None:
        """Capture the written text in one pass, show it in every tab and colour the commitment strip; when
        steered, write the plain continuation beside it and check that α = 0 writes exactly that."""
        if not generation.steps:
            return
        state = self.state
        captured = await self.work.run(job, "Capturing the written text in one pass…", captured_writing, loaded,
                                       generation, state.prompt, state.bos, self.session.typed_target(),
                                       self.session.target_as_written())
        if not (captured.ran and job.current):
            return
        analysis, blocks = captured.value
        note = f"{len(generation.generated_ids)} written"
        if generation.steering is not None:
            report = steering_report(analysis.run, generation.steering)
            note += (f" · steered: +{generation.steering.alpha:g}·v at block {report.block}, |α·v| = "
                     f"{report.vector_norm:.1f}, {report.ratio:.2f}× the stream's median norm there")
        self.session.show_analysis(loaded, job, analysis, started, note=note)
        written = written_text(loaded, prompt_ids, generation, commitment=blocks, done=True)
        job.publish(writing=written)
        if generation.steering is None:
            return
        checked = await self.work.run(job, "Writing the plain continuation to compare…", steering_check, loaded,
                                      prompt_ids, replace(generation.settings,
                                                          max_new_tokens=len(generation.generated_ids)),
                                      generation.steering)
        if not checked.ran:
            return
        plain, zero_is_plain = checked.value
        plain_tokens = token_strings(loaded, plain.generated_ids.tolist())
        verdict = "holds" if zero_is_plain else "FAILS"
        job.publish(writing=replace(written, plain=plain_tokens),
                    write_check=f"<p class='write-check'>Check: the same steering at α = 0 writes exactly the plain "
                                f"continuation: <b>{verdict}</b> ({len(plain_tokens)} tokens compared).</p>")
