"""The Norms tab's comparison: each new run's prompt, or a newly chosen model, runs through the model chosen in
"compare with" (another loaded model or revision) on the shared model threads, and its norms join the state."""

from __future__ import annotations

import logging

from layouts.norms_comparison import ComparedRun
from model_backend import LoadedModel, detect_sinks

from .analysis import page_run
from .failures import failure_message

log = logging.getLogger(__name__)


def compared_run(loaded: LoadedModel, prompt: str, bos: bool) -> ComparedRun:
    """The prompt run through the compared model, within the page's limits, and its sinks (on a model thread)."""
    run = page_run(loaded, prompt, bos)
    return ComparedRun(run, detect_sinks(run))


class NormsComparison:
    """Keeps the state's ``comparison`` in step with its run and its ``compare`` choice, for one session."""

    def __init__(self, session):
        self.session = session
        self.state = session.state
        self.state.param.watch(self.offer_the_others, ["model", "model_outcomes"])
        self.state.param.watch(session.launcher(self.compare), ["run", "compare"])

    def offer_the_others(self, *_events) -> None:
        """Offer every loaded model but the one in use."""
        self.state.compare_offered = [name for name in self.session.available if name != self.state.model]

    def chosen_model(self, name: str) -> LoadedModel | None:
        """The loaded model of that display name, or None where none loaded under it."""
        return next((o.loaded for o in self.session.outcomes if o.name == name and o.loaded is not None), None)

    async def compare(self) -> None:
        """Run the state's prompt through the chosen model and publish its run, or say why there is none."""
        state, publisher = self.state, self.session.publisher
        name, run = state.compare, state.run
        if not name or run is None:
            publisher.update(comparison=None, comparison_note="")
            return
        other = self.chosen_model(name)
        if other is None or name == state.model:
            why = "is the model in use" if name == state.model else "is not among the models loaded here"
            publisher.update(comparison=None, comparison_note=f"No comparison: {name} {why}.")
            return
        compared = await self.session.work.run("compare", f"Running the prompt through {name} to compare…",
                                               compared_run, other, run.prompt, run.bos,
                                               wanted=lambda: state.compare == name, reports=False)
        if compared.error is not None:
            log.warning("the comparison run through %s failed: %r", name, compared.error)
            compared.publish(comparison=None, comparison_note=f"{name} could not run this prompt for the "
                                                              f"comparison: {failure_message(compared.error)}")
        elif compared.ran:
            compared.publish(comparison=compared.value, comparison_note="")
