"""One browser session's controller: it runs the backend off the event loop and writes the results into the
state that every view watches.

A Run click's path: the button triggers ``state.run_requested``; ``run_prompt`` runs ``analysis.analyse`` (the
capture, the sink statistics, the next tokens) on a shared model thread (``model_work.py``); the run's job
(``jobs.py``) publishes it into the state under the document's lock (``publishing.py``); the shown tab's view
(``layouts``) redraws from the state, a hidden one when its tab is next shown; then the logit lens's opening
positions are read ahead while the model threads are idle. What a tab asks for later (lens, pattern, attribution,
sweep, NPZ) is ``tab_jobs.py``'s; the lessons and the Norms tab's comparison are ``lessons.py`` and ``comparison.py``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Awaitable

import numpy as np

from layouts.corrupted_prompt import corrupted_version
from layouts.state import ExplorerState
from model_backend import LoadedModel, LogitLens, PromptError, Run, joined_lens, logit_lens
from model_backend.targets import match_target

from .analysis import decoded
from .background import BackgroundTasks
from .comparison import NormsComparison
from .failures import report_failure
from .lens_reading import (
    LENS_IDLE_POLL_SECONDS,
    LENS_TOP_K,
    GivesWay,
    LensReadAhead,
    last_unread,
    unread_on_screen,
)
from .lessons import LessonGuide
from .model_work import alone_in_model_threads, in_model_thread, models_idle
from .model_names import outcome_rows, source_label
from .models import ModelOutcome, loading_progress, shared_model
from .jobs import Job, SessionJobs
from .npz_download import remove_npz
from .publishing import Publisher
from .run_batches import analysed_together
from .tab_jobs import TabJobs

log = logging.getLogger(__name__)
LOAD_PROGRESS_SECONDS = 0.5


class ExplorerSession(TabJobs):
    """Loads the configured models (once per process), then answers the state's requests."""

    def __init__(self, sources: list[str], state: ExplorerState | None = None, document=None):
        self.sources = sources
        self.state = state or ExplorerState()
        self.publisher = Publisher(self.state, document)
        self.showing = self.publisher.showing
        self.outcomes: list[ModelOutcome] = []
        self.loaded: LoadedModel | None = None
        self._work = asyncio.Lock()
        self.launcher = BackgroundTasks().launcher
        self.lens_read_ahead: LensReadAhead | None = None
        self.predicted_target = ""  # the top prediction a run put in the target box, replaced by the next run's
        self.jobs = SessionJobs(self.publisher)
        self.state.param.watch(self.launcher(self.run_prompt), "run_requested")
        self.state.param.watch(self.launcher(self.switch_model), "model")
        self.state.param.watch(self.launcher(self.read_pattern), "pattern_requested")
        self.state.param.watch(self.launcher(self.read_lens), "lens_requested")
        self.state.param.watch(self.launcher(self.sweep), "sweep_requested")
        self.state.param.watch(self.launcher(self.read_attribution), "attribution_requested")
        self.state.param.watch(self.launcher(self.patch), "patching_requested")
        self.state.param.watch(self.forget_patching, ["corrupted_prompt", "patch_answer", "patch_wrong"])
        self.derived_corrupted = ""  # the corrupted prompt a run derived from the prompt, replaced by the next run's
        self.state.param.watch(self.launcher(self.prepare_npz), "npz_requested")
        self.npz_path = None
        self.state.param.watch(self.launcher(self.run_prompt), "bos")
        self.state.param.watch(self.match_typed_target, ["target", "target_as_written"])
        self.next_probabilities = (None, None)  # (run, its next-token probabilities): a typed target's match
        self.state.param.watch(self.forget_attribution, ["run", "attribution_position", "target_id"])
        self.state.param.watch(self.forget_target_results, ["target_id", "raw_lens", "alpha"])
        self.lessons = LessonGuide(self)
        self.comparison = NormsComparison(self)

    @property
    def available(self) -> list[str]:
        """Display names of the models that loaded: the names the selector and the URL use."""
        return [o.name for o in self.outcomes if o.loaded is not None]

    async def start(self) -> None:
        """Try every configured model in order, then run the prompt once, through the URL's model if it is offered,
        else the first that loaded."""
        log.info("a page's session starts in server process %d", os.getpid())
        requested = self.state.model
        for source in self.sources:
            self.outcomes.append(await self.load_showing_progress(source))
        self.publisher.update(busy="")
        chosen = self.offer_loaded(requested)
        if chosen is not None:
            await self.switch_model(chosen)

    async def load_showing_progress(self, source: str) -> ModelOutcome:
        """The shared outcome of loading ``source``, while the page says what its load is doing (a first preparation
        downloads and dequantizes for half a minute; every page waiting on it sees the same steps)."""
        loading = asyncio.ensure_future(asyncio.to_thread(shared_model, source))
        while not loading.done():
            self.publisher.update(busy=loading_progress(source) or f"Loading {source_label(source)}…")
            await asyncio.wait([loading], timeout=LOAD_PROGRESS_SECONDS)
        return loading.result()

    def offer_loaded(self, requested: str | None) -> str | None:
        """List every outcome in the state, offer the models that loaded and choose one (``requested`` if offered,
        else the first); returns its name, or None with a message when none loaded."""
        offered = self.available
        if not offered:
            self.publisher.update(model_outcomes=outcome_rows(self.outcomes),
                                  message="No model could be loaded; see the reasons in the sidebar.")
            return None
        chosen = requested if requested in offered else offered[0]

        def offer() -> None:
            if requested not in (None, chosen):
                note = f"the link's model is not offered here; {chosen} is used"
                self.state.url_note = "; ".join(filter(None, (self.state.url_note, note)))
            self.state.param.model.objects = offered
            self.state.param.update(model_outcomes=outcome_rows(self.outcomes), model=chosen)
        self.publisher.apply(offer)
        return chosen

    async def switch_model(self, name: str | None = None) -> None:
        """Run the prompt through the named model (the state's by default) unless it is the one in use: the
        selector's new options and the start-up both name it, and a page load runs the prompt once."""
        outcome = next((o for o in self.outcomes if o.name == (name or self.state.model) and o.loaded), None)
        if outcome is None or outcome.loaded is self.loaded:
            return
        self.loaded = outcome.loaded
        self.publisher.update(bos_token=self.loaded.tokenizer.bos_token or "")
        await self.run_prompt()

    async def run_prompt(self) -> None:
        """Run the prompt off the event loop and publish what every view needs at once; the lens, the pattern, the
        attribution and the sweep are computed when their views ask."""
        if self.loaded is None:
            return
        state, loaded, job = self.state, self.loaded, self.jobs.start("run", None)
        async with self._work:
            if not job.current:
                return
            started = time.perf_counter()
            analysis = await self.reporting(f"Running the prompt through {loaded.display_name}…",
                                            analysed_together(loaded, state.prompt, state.bos,
                                                              self.typed_target(), self.target_as_written()))
            if analysis is None:
                self.publisher.update(stale="this prompt was not run (the sidebar says why); the views and the "
                                            "download belong to the previous run")
                return
            run = analysis.run
            match = analysis.target
            target = state.target if match.typed else analysis.top_prediction
            self.predicted_target = analysis.top_prediction
            self.next_probabilities = (run, analysis.next_probabilities)
            self.jobs.cancel("lens", "sweep", "pattern", "attribution", "npz", "patching")
            typed_corrupted = state.corrupted_prompt not in ("", self.derived_corrupted)
            self.derived_corrupted = corrupted_version(state.prompt)
            job.publish(
                family=loaded.family, run=run, sinks=analysis.sinks, lens=None, lens_tokens=None, lens_window=None,
                pattern=None, npz_link="", target=target, target_match=match, target_id=match.token_id,
                layer=min(state.layer, run.n_layers - 1), token=min(state.token, run.seq_len - 1), sweep=None,
                patching=None, patching_note="",
                corrupted_prompt=state.corrupted_prompt if typed_corrupted else self.derived_corrupted,
                message="", stale="", next_tokens=analysis.next_tokens,
                status=f"{loaded.display_name} ({loaded.origin}) · {loaded.compute} · {run.seq_len} tokens · forward "
                       f"pass {run.seconds:.2f} s · analyses {time.perf_counter() - started:.2f} s")
            self.read_lens_ahead(run, match.token_id)

    def typed_target(self) -> str:
        """The target box's text, or "" when it holds nothing or the top prediction a run put there."""
        return "" if self.state.target in ("", self.predicted_target) else self.state.target

    def target_as_written(self) -> bool:
        """Whether the box holds the offered spelling last chosen, which is followed as written."""
        return bool(self.state.target) and self.state.target == self.state.target_as_written

    def match_typed_target(self, *_events) -> None:
        """Match the box's new text after the run's prompt and follow it if it is one token; one that is not keeps
        the token followed now, and the target box says why. Only the tokenizer works here (the run's
        next-token probabilities are kept from its analysis), so it is done at once, in the page's callback. A
        spelling chosen is forgotten once the box holds another text."""
        state, run, loaded, typed = self.state, self.state.run, self.loaded, self.typed_target()
        as_written = self.target_as_written()
        if state.target_as_written and not as_written:
            state.target_as_written = ""
        analysed, probabilities = self.next_probabilities
        shown = state.target_match
        if run is None or loaded is None or (shown is not None and (shown.typed, shown.as_written) == (typed,
                                                                                                      as_written)):
            return
        if analysed is not run:  # a notebook's run, not analysed here: read from its logits
            probabilities = None
        try:
            match = match_target(loaded, run, typed, state.target_id, probabilities, as_written=as_written)
        except PromptError as error:
            report_failure(self.publisher, error)
            return
        state.param.update(target_match=match, target_id=match.token_id)

    def read_lens_ahead(self, run: Run, target_id: int) -> None:
        """While no other job wants the model threads, start reading the positions the run's lens grid opens on: the
        lens tab then opens without waiting for its first matmuls, the slowest part of any tab
        (``benchmarks/page_benchmark.py`` times the click on the lens tab). It gives way, between two boundaries, to any
        job another page asks for. Nothing is shown from here; ``read_lens`` picks the part up when the lens is asked
        for (and reads it itself if this read gave way or failed). ``target_id`` is the one the run publishes: the state
        has it only once the publish is applied."""
        self.lens_read_ahead = None
        if not models_idle():
            return
        raw, positions = self.state.raw_lens, unread_on_screen(np.ones(run.seq_len, dtype=bool), None)
        asked_for = threading.Event()
        gives_way = GivesWay(lambda: not asked_for.is_set() and not alone_in_model_threads())

        async def read() -> LogitLens | None:
            try:
                return await in_model_thread(logit_lens, self.loaded, run, k=LENS_TOP_K, target_id=target_id,
                                             raw=raw, positions=positions, keep_reading=gives_way)
            except Exception:  # noqa: BLE001 - read_lens reads these positions again and shows the failure
                return None

        self.lens_read_ahead = LensReadAhead(run, target_id, raw, positions, asyncio.ensure_future(read()), asked_for)

    async def part_read_ahead(self, run: Run, target_id: int | None, unread: np.ndarray) -> LogitLens | None:
        """The lens part read ahead for this run, target and readout (awaited while it is still being read), or
        None: none was, it gave way, failed or was cancelled (its event loop ended), or its positions are read
        already."""
        ahead = self.lens_read_ahead
        if not (ahead and ahead.belongs_to(run, target_id, self.state.raw_lens) and unread[ahead.positions].all()
                and not ahead.part.cancelled()):
            return None
        ahead.asked_for.set()
        with self.showing("Reading the logit lens…"):
            return await ahead.part

    def start_target_job(self, kind: str) -> tuple[Job, int | None] | None:
        """Start a job of ``kind`` on the current run for the followed target: (job, its token id), or None when
        there is no run yet."""
        if self.state.run is None or self.loaded is None:
            return None
        return self.jobs.start(kind, self.state.run), self.state.target_id

    def forget_target_results(self, *_events) -> None:
        """A new target, readout or α makes the lens and the sweep stale: their jobs stop, and their views ask again
        when shown."""
        self.jobs.cancel("lens", "sweep")
        self.state.param.update(lens=None, lens_tokens=None, sweep=None)

    def forget_patching(self, *_events) -> None:
        """A new corrupted prompt or token makes the patching stale: its job stops, and its view asks again when
        shown."""
        self.jobs.cancel("patching")
        self.state.param.update(patching=None, patching_note="")

    def forget_attribution(self, *_events) -> None:
        """A new run, position or target makes the attribution stale; its view asks again when shown."""
        self.jobs.cancel("attribution")
        self.state.attribution = None

    def stop_jobs(self) -> None:
        """Cancel every job (the page was closed): each stops at its next step and publishes nothing."""
        self.jobs.cancel()
        remove_npz(self.npz_path)
        log.info("a page closed: its jobs stop")

    async def read_lens(self) -> None:
        """Read the logit lens a chunk of positions at a time, publishing after each chunk: first what was read
        ahead after the run, the positions on screen, then the others while no other job wants the model threads;
        a new run, target or readout stops it between chunks. At a few hundred tokens the whole grid is several times
        the pass's matmuls: it must not hold up a classroom's runs, and a user who drags the grid sideways sees the
        positions they drag to next (``benchmarks/page_benchmark.py`` times both)."""
        started = self.start_target_job("lens")
        if started is None:
            return
        job, target_id = started
        loaded, run = self.loaded, job.run
        parts, unread = [], np.ones(run.seq_len, dtype=bool)
        while unread.any():
            part = (await self.part_read_ahead(run, target_id, unread)
                    or await self.read_lens_part(job, run, target_id, unread))
            if part is None or not job.current:
                return
            parts.append(part)
            unread[part.positions] = False
            lens = joined_lens(parts)
            job.publish(lens=lens, lens_tokens=decoded(loaded, lens.top_ids), message="")

    async def read_lens_part(self, job: Job, run: Run, target_id: int | None, unread: np.ndarray) -> LogitLens | None:
        """Read the lens's next positions once it is their turn, or None if the job is no longer wanted or failed.

        Positions off screen give way, between two boundaries, to another page's job and to a drag (a drag's own
        read would otherwise wait for the whole chunk); the next turn's positions are read then."""
        while (positions := await self.lens_positions_to_read(job, run, unread)) is not None:
            off_screen = not self.unread_shown(unread).size
            gives_way = GivesWay(lambda: not alone_in_model_threads()
                                 or self.unread_shown(unread).size > 0) if off_screen else None
            async with self._work:
                if not job.current:
                    return None
                part = await self.in_worker("Reading the logit lens…", logit_lens, self.loaded, run, k=LENS_TOP_K,
                                            target_id=target_id, raw=self.state.raw_lens, positions=positions,
                                            keep_reading=gives_way)
            if part is not None or gives_way is None or not gives_way.gave_way:
                return part
        return None

    def unread_shown(self, unread: np.ndarray) -> np.ndarray:
        """The unread positions the lens grid shows now (or nearly shows)."""
        return unread_on_screen(unread, self.state.lens_window)

    async def lens_positions_to_read(self, job: Job, run: Run, unread: np.ndarray) -> np.ndarray | None:
        """The lens's next positions: the unread ones on screen at once, else the last unread ones once the model
        threads are idle; None when the job is no longer wanted."""
        while job.current:
            if (shown := self.unread_shown(unread)).size:
                return shown
            if models_idle():
                return last_unread(unread)
            await asyncio.sleep(LENS_IDLE_POLL_SECONDS)
        return None

    async def in_worker(self, doing: str, function, *args, **kwargs):
        """Run backend work on a shared model thread while the page says what it is doing; on failure report it
        and return None."""
        return await self.reporting(doing, in_model_thread(function, *args, **kwargs))

    async def reporting(self, doing: str, work: Awaitable):
        """Await ``work`` while the page says what it is doing; on failure report it and return None."""
        with self.showing(doing):
            try:
                return await work
            except Exception as error:  # noqa: BLE001 - shown on the page, which stays usable
                report_failure(self.publisher, error)
                return None
