"""One browser session's controller: it runs the backend off the event loop and writes the results into the
state that every view watches. Only this module calls backend functions that take a loaded model."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from io import BytesIO

import numpy as np
import torch

from layouts.state import ExplorerState
from model_backend import (
    BackendError,
    LoadedModel,
    Run,
    capture_run,
    detect_sinks,
    logit_lens,
    scaling_sweep,
    write_npz,
)
from model_backend.tokens import token_strings

from .models import ModelOutcome, shared_model

log = logging.getLogger(__name__)
LENS_TOP_K = 5


@dataclass(frozen=True)
class Analysis:
    """What the views draw for one run, computed together in a worker thread (the logit lens and the sweep
    wait until their tab is shown: with a 50k vocabulary they cost more than the pass itself)."""

    run: Run
    sinks: object
    pattern: np.ndarray


def decoded(loaded: LoadedModel, token_ids: np.ndarray) -> np.ndarray:
    """Token ids decoded one by one (leading spaces kept), each distinct id decoded once."""
    unique, inverse = np.unique(token_ids, return_inverse=True)
    strings = np.array(token_strings(loaded, unique.tolist()), dtype=object)
    return strings[inverse].reshape(token_ids.shape)


def target_token_id(loaded: LoadedModel, text: str) -> int | None:
    """The first token of the target text (" Paris" -> one id), or None when the box is empty."""
    ids = loaded.tokenizer.encode(text, add_special_tokens=False)
    return ids[0] if ids else None


def lens_for(loaded: LoadedModel, run: Run, target_id: int | None, raw: bool):
    lens = logit_lens(loaded, run, k=LENS_TOP_K, target_id=target_id, raw=raw)
    return lens, decoded(loaded, lens.top_ids)


def analyse(loaded: LoadedModel, prompt: str, bos: bool, layer: int) -> Analysis:
    """Run the prompt and compute what most views show, in one worker thread."""
    run = capture_run(loaded, prompt, bos=bos)
    return Analysis(run, detect_sinks(run), run.attention_probabilities(min(layer, run.n_layers - 1)))


def failure_message(error: Exception) -> str:
    """What the page says when a computation fails; it stays usable either way."""
    if isinstance(error, BackendError):
        return str(error)
    if isinstance(error, (MemoryError, torch.OutOfMemoryError)):
        return "Out of memory: try a shorter prompt."
    return f"{type(error).__name__}: {error}"


class ExplorerSession:
    """Loads the configured models (once per process), then answers the state's requests."""

    def __init__(self, sources: list[str], state: ExplorerState | None = None):
        self.sources = sources
        self.state = state or ExplorerState()
        self.outcomes: list[ModelOutcome] = []
        self.loaded: LoadedModel | None = None
        self._work = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self.state.param.watch(self.launcher(self.run_prompt), "run_requested")
        self.state.param.watch(self.launcher(self.switch_model), "model")
        self.state.param.watch(self.launcher(self.read_pattern), "layer")
        self.state.param.watch(self.launcher(self.read_lens), ["target", "raw_lens", "lens_requested"])
        self.state.param.watch(self.launcher(self.sweep), "sweep_requested")

    def launcher(self, work):
        """A callback that starts ``work`` as its own task and returns at once.

        A coroutine awaited inside a Bokeh callback holds the session's document lock until it ends, so clicks
        would queue behind a long run; a separate task releases it, and Panel schedules the task's updates.
        Where no loop runs (``panel serve --warm`` runs the page once at start-up) the work runs to the end,
        which loads the models before the first visitor comes.
        """
        def launch(*_event) -> None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                asyncio.run(work())
                return
            task = loop.create_task(work())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return launch

    @property
    def available(self) -> dict[str, str]:
        """Display name -> source of every model that loaded."""
        return {o.name: o.source for o in self.outcomes if o.loaded is not None}

    async def start(self) -> None:
        """Try every configured model in order; the URL's model or the first that loads is used."""
        requested = self.state.model
        for source in self.sources:
            self.state.busy = f"Loading {source}…"
            self.outcomes.append(await asyncio.to_thread(shared_model, source))
        self.state.busy = ""
        self.state.model_outcomes = [(o.name, o.loaded is not None, o.loaded.origin if o.loaded else o.reason)
                                     for o in self.outcomes]
        self.state.param.model.objects = self.available
        if not self.available:
            self.state.message = "No model could be loaded; see the reasons in the sidebar."
            return
        chosen = requested if requested in self.available.values() else next(iter(self.available.values()))
        if chosen == self.state.model:
            await self.switch_model()
        else:
            self.state.model = chosen  # the watcher switches

    async def switch_model(self) -> None:
        outcome = next((o for o in self.outcomes if o.source == self.state.model and o.loaded is not None), None)
        if outcome is None:
            return
        self.loaded = outcome.loaded
        await self.run_prompt()

    async def run_prompt(self) -> None:
        """Run the prompt off the event loop, publish every view's data at once, then start the sweep."""
        if self.loaded is None:
            return
        state, loaded = self.state, self.loaded
        async with self._work:
            started = time.perf_counter()
            analysis = await self.in_worker(f"Running the prompt through {loaded.display_name}…", analyse, loaded,
                                            state.prompt, state.bos, state.layer)
            if analysis is None:
                return
            run = analysis.run
            state.param.update(
                family=loaded.family, run=run, sinks=analysis.sinks, lens=None, lens_tokens=None,
                pattern=analysis.pattern,
                layer=min(state.layer, run.n_layers - 1), token=min(state.token, run.seq_len - 1), sweep=None,
                message="", status=f"{loaded.display_name} ({loaded.origin}) · {run.seq_len} tokens · forward "
                                   f"pass {run.seconds:.2f} s · analyses {time.perf_counter() - started:.2f} s")

    async def read_pattern(self) -> None:
        async with self._work:
            run, layer = self.state.run, self.state.layer
            if run is None or layer >= run.n_layers:
                return
            pattern = await asyncio.to_thread(run.attention_probabilities, layer)
            if self.state.run is run:
                self.state.pattern = pattern

    async def read_lens(self) -> None:
        """Read the logit lens of the current run (with the target and raw switch), off the event loop."""
        state = self.state
        async with self._work:
            run, loaded = state.run, self.loaded
            if run is None or loaded is None:
                return
            target_id = target_token_id(loaded, state.target)
            result = await self.in_worker("Reading the logit lens…", lens_for, loaded, run, target_id, state.raw_lens)
            if result is None:
                return
            lens, lens_tokens = result
            if state.run is run:
                state.param.update(lens=lens, lens_tokens=lens_tokens, target_id=target_id, message="")

    async def sweep(self) -> None:
        """Scale each block's output by α in turn, reporting progress, off the event loop."""
        state = self.state
        loop = asyncio.get_running_loop()

        def progress(done: int, total: int) -> None:
            loop.call_soon_threadsafe(setattr, state, "sweep_progress", done / total)

        async with self._work:
            run, loaded = state.run, self.loaded
            if run is None or loaded is None:
                return
            target_id = target_token_id(loaded, state.target)
            if target_id is None:
                state.message = "Type a target token for the intervention."
                return
            sweep = await self.in_worker("Scaling each block…", scaling_sweep, loaded, run, target_id,
                                         alpha=state.alpha, progress=progress)
            if state.run is run and sweep is not None:
                state.sweep = sweep

    async def in_worker(self, doing: str, function, *args, **kwargs):
        """Run backend work in a thread while the page says what it is doing; on failure report it, return None."""
        self.state.busy = doing
        try:
            return await asyncio.to_thread(function, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 - shown on the page, which stays usable
            self.report(error)
            return None
        finally:
            self.state.busy = ""

    def report(self, error: Exception) -> None:
        """Show a failure on the page; the log gets a traceback only for failures the backend did not foresee."""
        if isinstance(error, BackendError):
            log.warning("request refused: %s", error)
        else:
            log.exception("request failed")
        self.state.message = failure_message(error)

    def npz_file(self):
        """The last run in the backend's NPZ format, for the download button."""
        buffer = BytesIO()
        if self.loaded is not None and self.state.run is not None:
            write_npz(self.loaded, self.state.run, buffer)
        buffer.seek(0)
        return buffer
