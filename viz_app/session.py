"""One browser session's controller: it runs the backend off the event loop and writes the results into the
state that every view watches. A Run click's path:

    Run, or Enter in the prompt box   layouts/controls.py: state.prompt holds the box's text; state.run_requested
         |
         v
    launcher(run_prompt)              background.py: a task of its own, so the click returns at once
         |
         v
    run_prompt                        this file: PageWork.run (work.py) cancels the page's last run, takes the
         |                            page's turn and sets the busy line
         v
    RunBatcher.analysed_together      run_batches.py: batched passes on a model thread (model_work.py) for the pages
         |                            waiting, then analysis.py: sinks and residual norms, next tokens, the target
         v
    job.publish                       jobs.py, publishing.py: into the state under the document's lock, if the
         |                            run is still wanted
         +------------------------+
         v                        v
    TabView.refresh               lens.read_ahead   lens_reading.py: the lens grid's opening positions, read once
    (layouts/tab_view.py):                          the run is sent, while the model threads are idle
    the shown tab's views redraw,
    a hidden one once shown

What a tab asks for later is ``TabJobs``'s (``tab_jobs.py``: pattern, sweep, patching, attribution, NPZ) and
``LensReader``'s (the lens); the lessons and the Norms tab's comparison are ``lessons.py`` and ``comparison.py``.
Every job is one call of the page's ``PageWork.run`` (``work.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from layouts.corrupted_prompt import corrupted_version
from layouts.state import ExplorerState
from model_backend import LoadedModel, PromptError
from model_backend.targets import match_target

from .background import BackgroundTasks
from .comparison import NormsComparison
from .failures import report_failure
from .lens_reading import LensReader
from .lessons import LessonGuide
from .model_names import outcome_rows, source_label
from .model_work import on_one_core
from .models import ModelOutcome, loading_progress, shared_model
from .jobs import Job
from .npz_download import remove_npz
from .publishing import BROWSER_DRAWING_SECONDS, Publisher
from .tab_jobs import TabJobs
from .writing import Writer
from .work import ModelWork, PageWork, process_model_work

log = logging.getLogger(__name__)
LOAD_PROGRESS_SECONDS = 0.5


class ExplorerSession:
    """Loads the configured models (once per process), then answers the state's requests."""

    def __init__(self, sources: list[str], state: ExplorerState | None = None, document=None,
                 model_work: ModelWork | None = None):
        self.sources = sources
        self.state = state or ExplorerState()
        self.publisher = Publisher(self.state, document)
        self.work = PageWork(model_work or process_model_work(), self.publisher)
        self.outcomes: list[ModelOutcome] = []
        self.loaded: LoadedModel | None = None
        self.launcher = BackgroundTasks().launcher
        self.predicted_target = ""  # the top prediction a run put in the target box, replaced by the next run's
        self.state.param.watch(self.launcher(self.run_prompt), "run_requested")
        self.state.param.watch(self.launcher(self.switch_model), "model")
        self.lens = LensReader(self)
        self.tab_jobs = TabJobs(self)
        self.state.param.watch(self.forget_patching, ["corrupted_prompt", "patch_answer", "patch_wrong"])
        self.derived_corrupted = ""  # the corrupted prompt a run derived from the prompt, replaced by the next run's
        self.state.param.watch(self.launcher(self.run_prompt), "bos")
        self.state.param.watch(self.match_typed_target, ["target", "target_as_written"])
        self.analysis = None  # the analysis of the run shown: a typed target is matched with its probabilities,
        # and it stays shared with the sessions that asked for the same run while this one shows it (run_batches.py)
        self.state.param.watch(self.forget_attribution, ["run", "attribution_position", "target_id"])
        self.state.param.watch(self.forget_target_results, ["target_id", "raw_lens", "alpha"])
        self.lessons = LessonGuide(self)
        self.comparison = NormsComparison(self)
        self.writer = Writer(self)

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
            if self.state.write:  # a link to a written text: the same settings write the same tokens
                await self.writer.write_from_link()

    async def load_showing_progress(self, source: str) -> ModelOutcome:
        """The shared outcome of loading ``source``, while the page says what its load is doing (a first preparation
        downloads and dequantizes for half a minute; every page waiting on it sees the same steps)."""
        loading = asyncio.ensure_future(asyncio.to_thread(on_one_core, shared_model, source))
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
        state, loaded, started = self.state, self.loaded, time.perf_counter()
        self.work.cancel("write")  # what was written so far stays in the Write tab
        done = await self.work.run("run", f"Running the prompt through {loaded.display_name}…",
                                   self.work.model_work.batcher(loaded).analysed_together, state.prompt, state.bos,
                                   self.typed_target(), self.target_as_written(), self.analysis, for_run=None)
        if done.error is not None:
            self.publisher.update(stale="this prompt was not run (the sidebar says why); the views and the "
                                        "download belong to the previous run")
        if not (done.ran and done.job.current):
            return
        self.show_analysis(loaded, done.job, done.value, started)

    def show_analysis(self, loaded: LoadedModel, job: Job, analysis, started: float, note: str = "") -> None:
        """Publish what every view needs from a run's analysis (``note`` ends its status line), and read the lens
        ahead once it is drawn."""
        state, run, match = self.state, analysis.run, analysis.target
        target = state.target if match.typed else analysis.top_prediction
        self.predicted_target = analysis.top_prediction
        self.analysis = analysis
        self.work.cancel("lens", "sweep", "pattern", "attribution", "npz", "patching", "flow")
        typed_corrupted = state.corrupted_prompt not in ("", self.derived_corrupted)
        self.derived_corrupted = corrupted_version(state.prompt)
        job.publish(
            family=loaded.family, run=run, sinks=analysis.sinks, lens=None, lens_tokens=None, lens_window=None,
            pattern=None, npz_link="", target=target, target_match=match, target_id=match.token_id,
            layer=min(state.layer, run.n_layers - 1), token=min(state.token, run.seq_len - 1), sweep=None,
            patching=None, patching_note="", flow=None, flow_note="",
            corrupted_prompt=state.corrupted_prompt if typed_corrupted else self.derived_corrupted,
            message="", stale="", next_tokens=analysis.next_tokens,
            status=f"{loaded.display_name} ({loaded.origin}) · {loaded.compute} · {run.seq_len} tokens · forward "
                   f"pass {run.seconds:.2f} s · analyses {time.perf_counter() - started:.2f} s"
                   + (f" · {note}" if note else ""))
        self.publisher.after_sent(lambda: self.read_lens_ahead(loaded, run, match.token_id),
                                  delay=BROWSER_DRAWING_SECONDS)

    def read_lens_ahead(self, loaded: LoadedModel, run, target_id: int | None) -> None:
        """Read the lens grid's opening positions ahead, once the browser has had the run's views and time to draw
        them, if that run is still the one shown: nobody waits for this read yet, while the run's drawing is waited
        for (``benchmarks/page_benchmark.py`` times both)."""
        if self.state.run is run:
            self.lens.read_ahead(loaded, run, target_id)

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
        shown = state.target_match
        if run is None or loaded is None or (shown is not None and (shown.typed, shown.as_written) == (typed,
                                                                                                      as_written)):
            return
        analysed_here = self.analysis is not None and self.analysis.run is run  # else a notebook's: read its logits
        probabilities = self.analysis.next_probabilities if analysed_here else None
        try:
            match = match_target(loaded, run, typed, state.target_id, probabilities, as_written=as_written)
        except PromptError as error:
            report_failure(self.publisher, error)
            return
        state.param.update(target_match=match, target_id=match.token_id)

    def start_target_job(self, kind: str) -> tuple[Job, int | None] | None:
        """Start a job of ``kind`` on the current run for the followed target: (job, its token id), or None when
        there is no run yet."""
        if self.state.run is None or self.loaded is None:
            return None
        return self.work.start(kind), self.state.target_id

    def forget_target_results(self, *_events) -> None:
        """A new target, readout or α makes the lens and the sweep stale: their jobs stop, and their views ask again
        when shown."""
        self.work.cancel("lens", "sweep")
        self.state.forget("lens", "lens_tokens", "sweep")

    def forget_patching(self, *_events) -> None:
        """A new corrupted prompt or token makes the patching stale: its job stops, and its view asks again when
        shown."""
        self.work.cancel("patching")
        self.state.forget("patching", "patching_note")

    def forget_attribution(self, *_events) -> None:
        """A new run, position or target makes the attribution stale; its view asks again when shown."""
        self.work.cancel("attribution")
        self.state.forget("attribution")

    def stop_jobs(self) -> None:
        """Cancel every job (the page was closed): each stops at its next step and publishes nothing."""
        self.work.cancel()
        remove_npz(self.tab_jobs.npz_path)
        log.info("a page closed: its jobs stop")
