"""One job of a page's background work (started, cancelled and run by ``work.PageWork``): a job belongs to one
run, can be cancelled, and publishes its result only if it is still wanted, checked when the write is applied under
the document's lock."""

from __future__ import annotations

from collections.abc import Callable

from .publishing import Publisher


class Job:
    """One piece of background work (a lens read, a sweep…) for the run shown when it started; a job that makes a new
    run has no run (``None``) and is current until cancelled."""

    def __init__(self, publisher: Publisher, kind: str, run, wanted: Callable[[], bool] = lambda: True):
        self.publisher, self.kind, self.run, self.wanted = publisher, kind, run, wanted
        self.cancelled = False

    def cancel(self) -> None:
        """Stop the job: it stops at its next step and publishes nothing more."""
        self.cancelled = True

    @property
    def current(self) -> bool:
        """Whether the job is still wanted: not cancelled, its run still the one shown, and its own condition met."""
        shown = self.run is None or self.publisher.state.run is self.run
        return not self.cancelled and shown and self.wanted()

    def publish(self, **values) -> None:
        """Write ``values`` into the page's state if, when the write is applied under the lock, the job is current."""
        def publish_if_current() -> None:
            if self.current:
                self.publisher.state.param.update(**values)
        self.publisher.apply(publish_if_current)
