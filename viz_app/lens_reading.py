"""A page's logit lens, read a chunk of positions at a time: which positions it reads next, the part read ahead
after a run before the lens tab asks, the parts held until the grid shows them, and the reader that schedules the
reads on the model threads."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import numpy as np

from layouts.logit_lens_view import VISIBLE_POSITIONS
from model_backend import LoadedModel, LogitLens, Run, joined_lens, logit_lens

from .analysis import decoded
from .jobs import Job
from .model_work import alone_in_model_threads, models_idle, stop_giving_way

LENS_TOP_K = 5
LENS_MARGIN_POSITIONS = 4
LENS_CHUNK_POSITIONS = 16
LENS_IDLE_POLL_SECONDS = 0.1


@dataclass(frozen=True)
class LensReadAhead:
    """The lens positions a new run's grid opens on, being read before the lens tab asks for them."""

    run: Run
    target_id: int | None
    raw: bool
    positions: np.ndarray
    part: asyncio.Task  # -> LogitLens, or None when the read gave way or failed
    asked_for: threading.Event  # set once the lens is asked for: the read then no longer gives way

    def belongs_to(self, run: Run, target_id: int | None, raw: bool) -> bool:
        return self.run is run and self.target_id == target_id and self.raw == raw


class GivesWay:
    """``keep_reading`` for a lens read nobody waits for yet: False, and remembered, once ``wanted_elsewhere``
    says the model threads are wanted for something else. Once ``waited_for()`` says somebody waits for it, the read
    goes on and counts as any job (``stop_giving_way``)."""

    def __init__(self, wanted_elsewhere, waited_for=None):
        self.wanted_elsewhere, self.waited_for = wanted_elsewhere, waited_for
        self.gave_way = self.goes_on = False

    def __call__(self) -> bool:
        if not (self.gave_way or self.goes_on) and self.waited_for is not None and self.waited_for():
            self.goes_on = True
            stop_giving_way()
        self.gave_way = self.gave_way or (not self.goes_on and self.wanted_elsewhere())
        return not self.gave_way


def shown_range(seq_len: int, window: tuple[int, int] | None) -> tuple[int, int]:
    """The first and last position the lens grid shows: its window, or without one the last positions, where a
    run's grid opens."""
    return (max(seq_len - VISIBLE_POSITIONS, 0), seq_len - 1) if window is None else window


def unread_on_screen(unread: np.ndarray, window: tuple[int, int] | None) -> np.ndarray:
    """Unread positions the lens grid shows, at most a chunk of them."""
    first, last = shown_range(len(unread), window)
    return (np.flatnonzero(unread[first : last + 1]) + first)[-LENS_CHUNK_POSITIONS:]


def next_off_screen(unread: np.ndarray, window: tuple[int, int] | None) -> np.ndarray:
    """The next chunk of unread positions the grid does not show: those it nearly shows (a margin each side), where a
    small drag goes, then the last unread ones (the grid fills leftwards from where it opens). Each lm_head call
    streams the whole unembedding: the margin is read with others, after what is on screen."""
    first, last = shown_range(len(unread), window)
    near = np.zeros_like(unread)
    near[max(first - LENS_MARGIN_POSITIONS, 0) : last + LENS_MARGIN_POSITIONS + 1] = True
    near &= unread
    others = np.flatnonzero(unread & ~near)
    fill = max(LENS_CHUNK_POSITIONS - int(near.sum()), 0)
    return np.union1d(np.flatnonzero(near), others[len(others) - min(fill, len(others)):])


class LensParts:
    """The parts of one lens job read so far: those published, and those read off screen and held back until the
    grid shows them or the read ends. Every publish makes the browser lay out the text of every cell sent so far
    again: a chunk streamed each time one is read kept a page drawn on this machine busy while a drag waited
    (``benchmarks/page_benchmark.py`` times the drag)."""

    def __init__(self, job: Job, loaded: LoadedModel):
        self.job, self.loaded = job, loaded
        self.published: list[LogitLens] = []
        self.held: list[LogitLens] = []

    def add(self, part: LogitLens, window: tuple[int, int] | None, last: bool) -> None:
        """Keep a part just read; publish it, with the held parts the grid shows, if the grid shows it, and every
        part if it is the last."""
        self.held.append(part)
        if last or shown_in(part, window, self.job.run.seq_len):
            self.publish(window, everything=last)

    def publish(self, window: tuple[int, int] | None, everything: bool = False) -> None:
        """Publish the parts published before and the held ones the grid shows (all of them with ``everything``);
        nothing when none of the held ones is shown."""
        shown, still_held = [], []
        for part in self.held:
            (shown if everything or shown_in(part, window, self.job.run.seq_len) else still_held).append(part)
        if not shown:
            return
        self.held, self.published = still_held, self.published + shown
        lens = joined_lens(self.published)
        self.job.publish(lens=lens, lens_tokens=decoded(self.loaded, lens.top_ids), message="")


def shown_in(part: LogitLens, window: tuple[int, int] | None, seq_len: int) -> bool:
    """Whether the lens grid of a run of ``seq_len`` positions, showing ``window``, shows any position of ``part``."""
    first, last = shown_range(seq_len, window)
    return bool(((part.positions >= first) & (part.positions <= last)).any())


class LensReader:
    """Reads one page's logit lens for the run shown: ahead after each run while the model threads are idle, then,
    when the lens tab asks, a chunk at a time with the positions on screen first."""

    def __init__(self, session):
        self.session, self.state, self.work = session, session.state, session.work
        self.ahead: LensReadAhead | None = None
        self.parts: LensParts | None = None  # those of the lens job reading now
        self.state.param.watch(session.launcher(self.read), "lens_requested")
        self.state.param.watch(self.show_held_parts, "lens_window")

    def read_ahead(self, loaded: LoadedModel, run: Run, target_id: int) -> None:
        """Once no other job wants the model threads, read the positions the run's lens grid opens on: the lens tab
        then opens without waiting for its first matmuls, the slowest part of any tab (``benchmarks/page_benchmark.py``
        times the click on the lens tab). It gives way, between two slices of the unembedding, to any job another
        page asks for, and starts again once the model threads are idle, while the run is the one shown and its
        reading the page's. Asked for, it no longer gives way and takes every core the other jobs leave it. Nothing
        is shown from here; ``read`` picks the part up when the lens is asked for (and reads it itself if this read
        failed). ``target_id`` is the one the run publishes: the state has it only once the publish is applied."""
        raw, positions = self.state.raw_lens, unread_on_screen(np.ones(run.seq_len, dtype=bool), None)
        asked_for = threading.Event()

        def superseded() -> bool:
            """Whether a newer run, read ahead or readout has replaced this one (asked from any thread)."""
            ahead = self.ahead
            return (self.state.run is not run or ahead is None or ahead.asked_for is not asked_for
                    or not ahead.belongs_to(run, target_id, self.state.raw_lens))

        async def idle_again() -> bool:
            """Wait until the model threads are idle or the lens is asked for; False once the read ahead is no
            longer wanted."""
            while not asked_for.is_set():
                if superseded():
                    return False
                if models_idle():
                    return True
                await asyncio.sleep(LENS_IDLE_POLL_SECONDS)
            return True

        async def read(idle_now: bool) -> LogitLens | None:
            if not (idle_now or await idle_again()):
                return None
            while True:
                gives_way = GivesWay(lambda: not alone_in_model_threads() or superseded(), waited_for=asked_for.is_set)
                done = await self.work.run("lens ahead", None, logit_lens, loaded, run, k=LENS_TOP_K,
                                           target_id=target_id, raw=raw, positions=positions, keep_reading=gives_way,
                                           for_run=run, gives_way=True)
                if not done.ran:  # failed: read reads these positions again and shows the failure
                    return None
                part = done.value
                if part is not None or not await idle_again():
                    return part

        part = asyncio.ensure_future(read(models_idle()))
        self.ahead = LensReadAhead(run, target_id, raw, positions, part, asked_for)

    async def part_read_ahead(self, run: Run, target_id: int | None, unread: np.ndarray) -> LogitLens | None:
        """The lens part read ahead for this run, target and readout (awaited while it is still being read), or
        None: none was, it failed, stopped or was cancelled (its event loop ended), or its positions are read
        already."""
        ahead = self.ahead
        if not (ahead and ahead.belongs_to(run, target_id, self.state.raw_lens) and unread[ahead.positions].all()
                and not ahead.part.cancelled()):
            return None
        ahead.asked_for.set()
        with self.work.publisher.showing("Reading the logit lens…"):
            return await ahead.part

    async def read(self) -> None:
        """Read the logit lens a chunk of positions at a time: first what was read ahead after the run, the
        positions on screen, then the others while no other job wants the model threads; a new run, target or
        readout stops it between chunks. A chunk the grid shows is published at once; the others once the grid
        shows them or the last is read (``LensParts``). On a long prompt the whole grid costs more than the pass:
        it must not hold up a classroom's runs, and a user who drags the grid sideways sees the positions they drag
        to next (``benchmarks/page_benchmark.py`` times both)."""
        started = self.session.start_target_job("lens")
        if started is None:
            return
        job, target_id = started
        loaded, run = self.session.loaded, job.run
        self.parts, unread = LensParts(job, loaded), np.ones(run.seq_len, dtype=bool)
        while unread.any():
            part = (await self.part_read_ahead(run, target_id, unread)
                    or await self.read_part(job, loaded, run, target_id, unread))
            if part is None or not job.current:
                return
            unread[part.positions] = False
            self.parts.add(part, self.state.lens_window, last=not unread.any())

    def show_held_parts(self, event) -> None:
        """After a drag or zoom, publish the held parts the grid now shows."""
        if self.parts is not None and self.parts.job.current:
            self.parts.publish(event.new)

    async def read_part(self, job: Job, loaded: LoadedModel, run: Run, target_id: int | None,
                        unread: np.ndarray) -> LogitLens | None:
        """Read the lens's next positions once it is their turn, or None if the job is no longer wanted or failed.

        Positions off screen give way, between two slices of the unembedding, to another page's job and to a drag
        elsewhere (a drag's own read would otherwise wait for the whole chunk); the next turn's positions are read
        then. A drag onto positions the chunk is reading makes it go on instead: the page now waits for it."""
        while (positions := await self.positions_to_read(job, unread)) is not None:
            off_screen = not self.unread_shown(unread).size
            gives_way = GivesWay(lambda: not alone_in_model_threads() or self.unread_shown(unread).size > 0,
                                 waited_for=lambda: self.shown_only_in(positions, unread)) if off_screen else None
            done = await self.work.run(job, "Reading the logit lens…", logit_lens, loaded, run, k=LENS_TOP_K,
                                       target_id=target_id, raw=self.state.raw_lens, positions=positions,
                                       keep_reading=gives_way, gives_way=gives_way is not None)
            part = done.value if done.ran else None
            if part is not None or gives_way is None or not gives_way.gave_way:
                return part
        return None

    def unread_shown(self, unread: np.ndarray) -> np.ndarray:
        """The unread positions the lens grid shows now."""
        return unread_on_screen(unread, self.state.lens_window)

    def shown_only_in(self, positions: np.ndarray, unread: np.ndarray) -> bool:
        """Whether the grid shows unread positions now, all of them among ``positions`` (a chunk being read)."""
        shown = self.unread_shown(unread)
        return bool(shown.size) and bool(np.isin(shown, positions).all())

    async def positions_to_read(self, job: Job, unread: np.ndarray) -> np.ndarray | None:
        """The lens's next positions: the unread ones on screen at once, else the next off-screen ones once the model
        threads are idle; None when the job is no longer wanted."""
        while job.current:
            if (shown := self.unread_shown(unread)).size:
                return shown
            if models_idle():
                return next_off_screen(unread, self.state.lens_window)
            await asyncio.sleep(LENS_IDLE_POLL_SECONDS)
        return None
