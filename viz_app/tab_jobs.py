"""The jobs a session runs when a tab asks: the attention pattern, the intervention sweep, activation patching, the
attribution and the NPZ file; each is a ``Job`` on the run shown, published only while that run is still shown."""

from __future__ import annotations

import numpy as np

from model_backend import Patching, ScalingSweep, scaled_logprob, unscaled_logprob
from model_backend.flow import information_flow
from model_backend.patching import pair_with_run, patch_block

from .analysis import attribution_for
from .failures import failure_message
from .npz_download import new_npz_path, npz_file_name, npz_link, remove_npz, serve_downloads, write_npz_file
from .publishing import BROWSER_DRAWING_SECONDS


class TabJobs:
    """The jobs one page's tabs ask for, each a call of the page's work on its model and run shown."""

    def __init__(self, session):
        self.session, self.state, self.work = session, session.state, session.work
        self.publisher = session.publisher
        self.npz_path = None
        watch = [(self.read_pattern, "pattern_requested"), (self.sweep, "sweep_requested"),
                 (self.read_attribution, "attribution_requested"), (self.patch, "patching_requested"),
                 (self.prepare_npz, "npz_requested"), (self.trace_flow, "flow_requested")]
        for job, request in watch:
            self.state.param.watch(session.launcher(job), request)

    async def read_pattern(self) -> None:
        """Recompute the open block's attention pattern (asked by the attention view when it is shown)."""
        run, layer = self.state.run, self.state.layer
        if run is None or layer >= run.n_layers:
            return
        done = await self.work.run("pattern", "Reading the attention pattern…", run.attention_probabilities, layer)
        if done.ran:
            done.publish(pattern=done.value, pattern_layer=layer)

    async def sweep(self) -> None:
        """Scale each block's output by α in turn, one pass per block, publishing each point as it comes; a new
        run or target stops it between passes."""
        state, loaded, run, target_id = self.state, self.session.loaded, self.state.run, self.state.target_id
        if run is None or loaded is None:
            return
        if target_id is None:
            self.publisher.update(message="Type a target token for the intervention.")
            return
        clean = await self.work.run("sweep", "Running the prompt once, nothing scaled…", unscaled_logprob, loaded,
                                    run, target_id)
        if not (clean.ran and clean.job.current):
            return
        alpha, scaled, vocabulary = state.alpha, [], run.vocab_size
        clean.publish(sweep=ScalingSweep(target_id, "layer_output", alpha, clean.value, np.array(scaled), vocabulary))
        # the tab's first drawing of this run goes out, and the browser draws it, before the passes take the cores
        await self.publisher.sent(delay=BROWSER_DRAWING_SECONDS)
        for layer in range(run.n_layers):
            point = await self.work.run(clean.job, f"Scaling block {layer}…", scaled_logprob, loaded, run, target_id,
                                        layer, alpha=alpha)
            if not (point.ran and point.job.current):
                return
            scaled.append(point.value)
            point.publish(sweep=ScalingSweep(target_id, "layer_output", alpha, clean.value, np.array(scaled),
                                             vocabulary))

    async def patch(self) -> None:
        """Patch the run shown with the corrupted prompt: its pass first (the metric and the empty grids are shown),
        then one block's row at a time, each published as it comes; a new run, corrupted prompt or token stops it
        between blocks."""
        state, loaded, run = self.state, self.session.loaded, self.state.run
        if run is None or loaded is None:
            return
        asked = (state.corrupted_prompt, state.patch_answer, state.patch_wrong)
        paired = await self.work.run(
            "patching", "Running the corrupted prompt…", pair_with_run, loaded, run, asked[0],
            answer=asked[1] or None, wrong=asked[2] or None,
            wanted=lambda: asked == (state.corrupted_prompt, state.patch_answer, state.patch_wrong))
        if paired.error is not None:
            paired.publish(patching_note=failure_message(paired.error))
        if not paired.ran:
            return
        patching = Patching.empty(paired.value)
        paired.publish(patching=patching, patching_note="")
        for layer in range(run.n_layers):
            block = await self.work.run(paired.job, f"Patching block {layer}…", patch_block, loaded, paired.value,
                                        layer)
            if not (block.ran and block.job.current):
                return
            patching = patching.with_block(block.value)
            block.publish(patching=patching)

    async def read_attribution(self) -> None:
        """Attribute the logit at the chosen position to every writer and head, off the event loop (asked by its
        view when shown); dropped if the run, position or target changed meanwhile."""
        state, run, loaded = self.state, self.state.run, self.session.loaded
        if run is None or loaded is None or state.attribution is not None:
            return
        asked = (state.attribution_position, state.target_id)
        position = state.attribution_position if state.attribution_position < run.seq_len else -1
        done = await self.work.run("attribution", "Attributing the logit…", attribution_for, loaded, run,
                                   state.target_id, position,
                                   wanted=lambda: asked == (state.attribution_position, state.target_id))
        if done.ran:
            done.publish(attribution=done.value)

    async def trace_flow(self) -> None:
        """Every part's share of each whole for the information-flow graph (asked by its view when shown); a
        refusal (too long, an anatomy not decomposed) is said in the tab."""
        run, loaded = self.state.run, self.session.loaded
        if run is None or loaded is None or self.state.flow is not None:
            return
        done = await self.work.run("flow", "Tracing the information flow…", information_flow, loaded, run,
                                   reports=False)
        if done.error is not None:
            done.publish(flow_note=failure_message(done.error))
        elif done.ran:
            done.publish(flow=done.value, flow_note="")

    async def prepare_npz(self) -> None:
        """Write the last run as NPZ off the event loop to a file of this page's, then offer its link."""
        run, loaded = self.state.run, self.session.loaded
        if run is None or loaded is None:
            return
        done = await self.work.run("npz", "Writing the run's NPZ file…", write_npz_file, loaded, run,
                                   new_npz_path(npz_file_name(loaded.display_name, run.prompt)))
        if done.ran:
            remove_npz(self.npz_path)
            self.npz_path = done.value
            done.publish(npz_link=npz_link(done.value, serve_downloads(self.publisher.document)),
                         npz_megabytes=done.value.stat().st_size / 1e6)
