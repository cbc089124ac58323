"""The jobs a session runs when a tab asks: the attention pattern, the intervention sweep, activation patching, the
attribution and the NPZ file; each is a ``Job`` on the run shown, published only while that run is still shown."""

from __future__ import annotations

import numpy as np

from model_backend import Patching, ScalingSweep, scaled_logprob, unscaled_logprob
from model_backend.patching import pair_with_run, patch_block

from .analysis import attribution_for
from .failures import failure_message, report_failure
from .model_work import in_model_thread
from .npz_download import new_npz_path, npz_file_name, npz_link, remove_npz, serve_downloads, write_npz_file
from .publishing import BROWSER_DRAWING_SECONDS


class TabJobs:
    """The jobs one page's tabs ask for, run with the session's worker on its model and run shown."""

    def __init__(self, session):
        self.session, self.state, self.jobs = session, session.state, session.jobs
        self.worker, self.publisher = session.worker, session.publisher
        self.npz_path = None
        watch = [(self.read_pattern, "pattern_requested"), (self.sweep, "sweep_requested"),
                 (self.read_attribution, "attribution_requested"), (self.patch, "patching_requested"),
                 (self.prepare_npz, "npz_requested")]
        for job, request in watch:
            self.state.param.watch(session.launcher(job), request)

    async def read_pattern(self) -> None:
        """Recompute the open block's attention pattern (asked by the attention view when it is shown)."""
        async with self.worker.lock:
            run, layer = self.state.run, self.state.layer
            if run is None or layer >= run.n_layers:
                return
            job = self.jobs.start("pattern", run)
            pattern = await in_model_thread(run.attention_probabilities, layer)
            job.publish(pattern=pattern, pattern_layer=layer)

    async def sweep(self) -> None:
        """Scale each block's output by α in turn, one pass per block, publishing each point as it comes; a new
        run or target stops it between passes."""
        started = self.session.start_target_job("sweep")
        if started is None:
            return
        job, target_id = started
        state, loaded, run = self.state, self.session.loaded, job.run
        if target_id is None:
            self.publisher.update(message="Type a target token for the intervention.")
            return
        clean = await self.worker.run_if_current(job, "Running the prompt once, nothing scaled…", unscaled_logprob,
                                                 loaded, run, target_id)
        if clean is None or not job.current:
            return
        alpha, scaled, vocabulary = state.alpha, [], run.vocab_size
        job.publish(sweep=ScalingSweep(target_id, "layer_output", alpha, clean, np.array(scaled), vocabulary))
        # the tab's first drawing of this run goes out, and the browser draws it, before the passes take the cores
        await self.publisher.sent(delay=BROWSER_DRAWING_SECONDS)
        for layer in range(run.n_layers):
            point = await self.worker.run_if_current(job, f"Scaling block {layer}…", scaled_logprob, loaded, run,
                                                     target_id, layer, alpha=alpha)
            if point is None or not job.current:
                return
            scaled.append(point)
            job.publish(sweep=ScalingSweep(target_id, "layer_output", alpha, clean, np.array(scaled), vocabulary))

    async def patch(self) -> None:
        """Patch the run shown with the corrupted prompt: its pass first (the metric and the empty grids are shown),
        then one block's row at a time, each published as it comes; a new run, corrupted prompt or token stops it
        between blocks."""
        state, loaded, run = self.state, self.session.loaded, self.state.run
        if run is None or loaded is None:
            return
        asked = (state.corrupted_prompt, state.patch_answer, state.patch_wrong)
        job = self.jobs.start("patching", run,
                              wanted=lambda: asked == (state.corrupted_prompt, state.patch_answer, state.patch_wrong))
        async with self.worker.lock:
            if not job.current:
                return
            try:
                with self.worker.showing("Running the corrupted prompt…"):
                    pair = await in_model_thread(pair_with_run, loaded, run, asked[0], answer=asked[1] or None,
                                                 wrong=asked[2] or None)
            except Exception as error:  # noqa: BLE001 - shown in the tab and the sidebar; the page stays usable
                report_failure(self.publisher, error)
                job.publish(patching_note=failure_message(error))
                return
        patching = Patching.empty(pair)
        job.publish(patching=patching, patching_note="")
        for layer in range(run.n_layers):
            block = await self.worker.run_if_current(job, f"Patching block {layer}…", patch_block, loaded, pair,
                                                     layer)
            if block is None or not job.current:
                return
            patching = patching.with_block(block)
            job.publish(patching=patching)

    async def read_attribution(self) -> None:
        """Attribute the logit at the chosen position to every writer and head, off the event loop (asked by its
        view when shown); dropped if the run, position or target changed meanwhile."""
        state = self.state
        async with self.worker.lock:
            run, loaded = state.run, self.session.loaded
            if run is None or loaded is None or state.attribution is not None:
                return
            asked = (state.attribution_position, state.target_id)
            job = self.jobs.start("attribution", run,
                                  wanted=lambda: asked == (state.attribution_position, state.target_id))
            position = state.attribution_position if state.attribution_position < run.seq_len else -1
            attribution = await self.worker.run("Attributing the logit…", attribution_for, loaded, run,
                                                state.target_id, position)
            if attribution is not None:
                job.publish(attribution=attribution)

    async def prepare_npz(self) -> None:
        """Write the last run as NPZ off the event loop to a file of this page's, then offer its link."""
        run, loaded = self.state.run, self.session.loaded
        if run is None or loaded is None:
            return
        job = self.jobs.start("npz", run)
        path = await self.worker.run("Writing the run's NPZ file…", write_npz_file, loaded, run,
                                     new_npz_path(npz_file_name(loaded.display_name, run.prompt)))
        if path is not None:
            remove_npz(self.npz_path)
            self.npz_path = path
            job.publish(npz_link=npz_link(path, serve_downloads(self.publisher.document)),
                        npz_megabytes=path.stat().st_size / 1e6)
