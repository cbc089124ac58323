"""Runs that wait for the model at the same moment go through it in padded batches (``capture_batch``): a class
pressing Run together costs a few passes of larger matrices instead of thirty small ones, each session then getting
its own rows. ``benchmarks/classroom_load.py`` measures what it saves.

Runs that ask for the same thing (the same prompt, BOS and target on the same model) are computed once: asked
together they share one row of one pass, and asked while a session still shows that analysis they get it at once,
with no pass. The sessions share it read-only (``Run`` holds read-only arrays); a kept analysis lives only as long
as some session shows it, so keeping costs no memory beyond what the sessions show (``docs/classroom-scaling.md``).

The first run asked starts a collector for its model (a ``RunBatcher`` per model and event loop): one job on the
shared model threads (``model_work.py``) that takes every run waiting when a thread takes it up. A lone run's job
therefore starts as soon as a thread is free, with no waiting window. A job cuts its runs into batches of similar
length, so that little of a pass is padding; runs asked while it computes join the batches not yet run (a student a
moment late waits for one batch, not for the class's); each batch's runs hear their outcomes as soon as it is done,
so their pages publish while the next batch computes.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from model_backend import LoadedModel, capture_batch
from model_backend.tokens import encode_prompt

from .analysis import Analysis, analysis_of
from .held_collections import hold, release_when_idle
from .model_work import in_model_thread
from .prompt_limits import check_page_token_limit

MAX_BATCH_TOKENS = 16_384  # rows times the longest row: one batch's padded size, which its activations scale with
MAX_BATCH_PATTERN = 2_048 ** 2  # rows times the longest row squared, which each block's attention pattern scales with
PASS_COST_TOKENS = 128  # a pass's fixed cost (every block's calls and hooks) in padded tokens' worth


@dataclass(frozen=True)
class AskedRun:
    """One session's run waiting for its batch, and where its analysis goes."""

    prompt: str
    bos: bool
    typed_target: str  # matched after the prompt once its run is captured
    analysis: Future
    target_as_written: bool = False  # the typed target is an offered spelling, matched as written
    shown: object = None  # the analysis the asking page shows now: asked again, it is computed again

    @property
    def asks_for(self) -> tuple:
        """Everything the run's analysis depends on besides the model: runs that ask for the same share one."""
        return self.prompt, self.bos, self.typed_target, self.target_as_written


class RunBatcher:
    """The runs of one shared model asked on one event loop (a collector on a loop that stopped running, a notebook's
    or a test's, then never holds up the runs asked on another)."""

    def __init__(self, loaded: LoadedModel, loop: asyncio.AbstractEventLoop):
        self.loaded, self.loop = loaded, loop
        self.waiting: list[AskedRun] = []  # runs asked and not yet taken by a job
        self.collecting = False  # whether a collector runs
        self.asking = threading.Lock()
        self.tasks: set[asyncio.Future] = set()  # the collector and its releases, kept referenced until they end
        self.kept: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # asks_for -> an analysis still shown

    async def analysed_together(self, prompt: str, bos: bool, typed_target: str = "",
                                target_as_written: bool = False, shown: Analysis | None = None) -> Analysis:
        """What every view needs from the prompt's run, if within the page's limits, its pass shared with the runs
        of other sessions that wait for the model at the same moment; the analysis another session shows if it
        asked for the same. ``shown``, the asking page's own, is not given back: a Run pressed again makes a new
        pass, whose status line the page then shows."""
        asked = AskedRun(prompt, bos, typed_target, Future(), target_as_written, shown)
        if (kept := self.kept_for(asked)) is not None:
            return kept
        with self.asking:
            self.waiting.append(asked)
            first = not self.collecting  # else the running collector takes this run in its next job
            self.collecting = True
        if first:
            self.keep_until_done(asyncio.ensure_future(self.collect()))
        return await asyncio.wrap_future(asked.analysis)

    async def collect(self) -> None:
        """Jobs that take the waiting runs until none is left. A job's last batch hears its outcomes once the job
        has ended, so that a lone run's session, going on from its run, finds the model threads idle
        (``models_idle``: the lens reads ahead then). Python's automatic collections wait meanwhile
        (``held_collections.py``)."""
        hold()
        try:
            while True:
                try:
                    outcomes = await in_model_thread(self.analyse_waiting, deliver)
                except BaseException:
                    with self.asking:
                        self.collecting = False  # the next run asked starts a collector again
                    raise
                deliver(outcomes)
                with self.asking:
                    if not self.waiting:
                        self.collecting = False
                        return
        finally:
            self.keep_until_done(asyncio.ensure_future(release_when_idle()))

    def keep_until_done(self, task: asyncio.Future) -> None:
        """Keep a scheduled task referenced until it ends (the event loop holds only weak references to tasks)."""
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def kept_for(self, asked: AskedRun) -> Analysis | None:
        """The analysis a session still shows of a run that asked for the same, if any, unless it is the asking
        page's own."""
        with self.asking:
            kept = self.kept.get(asked.asks_for)
        return None if kept is asked.shown else kept

    def keep(self, outcomes: list[tuple[AskedRun, Analysis | Exception]]) -> None:
        """Keep the analyses just made while sessions show them (an error is not kept: the next ask tries again)."""
        with self.asking:
            for asked, outcome in outcomes:
                if isinstance(outcome, Analysis):
                    self.kept[asked.asks_for] = outcome

    def take_waiting(self) -> list[AskedRun]:
        """Every run waiting now, taken off the queue."""
        with self.asking:
            taken, self.waiting = self.waiting, []
        return taken

    def analyse_waiting(self, deliver_early: Callable[[list], None]) -> list[tuple[AskedRun, Analysis | Exception]]:
        """Analyse the waiting runs batch by batch, taking the runs asked meanwhile into the batches not yet run:
        each batch but the last goes to ``deliver_early`` once done; returns the last batch's outcomes. The batch
        holding the runs taken earliest goes first (the shortest of those), so a run asked later never overtakes one
        waiting already unless they share a pass. A run that asks for the same as one pending shares its row, and
        one that asks for an analysis made meanwhile and still shown gets it with no pass."""
        pending, taken_at, outcomes = [], {}, []
        sharing: dict[tuple, list[AskedRun]] = {}  # asks_for of each pending run -> the runs that share its row
        for turn in itertools.count():
            taken, from_kept = [], []
            for asked, ids in tokenized(self.loaded, self.take_waiting(), deliver_early):
                if asked.asks_for in sharing:
                    sharing[asked.asks_for].append(asked)
                elif (kept := self.kept_for(asked)) is not None:
                    from_kept.append((asked, kept))
                else:
                    sharing[asked.asks_for] = []
                    taken.append((asked, ids))
            deliver_early(from_kept)
            taken_at |= {id(asked): turn for asked, _ in taken}
            pending += taken
            if not pending:
                return outcomes
            deliver_early(outcomes)
            batch = min(batches(pending), key=lambda batch: min(taken_at[id(asked)] for asked, _ in batch))
            chosen = {id(asked) for asked, _ in batch}
            pending = [item for item in pending if id(item[0]) not in chosen]
            outcomes = analysed_batch(self.loaded, batch)
            self.keep(outcomes)
            outcomes += [(twin, outcome) for asked, outcome in outcomes for twin in sharing.pop(asked.asks_for)]


def deliver(outcomes: list[tuple[AskedRun, Analysis | Exception]]) -> None:
    """Hand each run its analysis or the error that stopped it (from any thread: its session awaits it)."""
    for asked, outcome in outcomes:
        if isinstance(outcome, Exception):
            asked.analysis.set_exception(outcome)
        else:
            asked.analysis.set_result(outcome)


def tokenized(loaded: LoadedModel, taken: list[AskedRun], refuse: Callable[[list], None],
              ) -> list[tuple[AskedRun, list[int]]]:
    """The runs taken, each with its token ids; a prompt over the page's limits goes to ``refuse`` with its
    error."""
    refused, tokenized = [], []
    for asked in taken:
        try:
            token_ids = encode_prompt(loaded, asked.prompt, bos=asked.bos)
            check_page_token_limit(loaded, len(token_ids))
            tokenized.append((asked, token_ids))
        except Exception as error:  # noqa: BLE001 - the session reports it
            refused.append((asked, error))
    refuse(refused)
    return tokenized


def analysed_batch(loaded: LoadedModel, batch: list[tuple[AskedRun, list[int]]],
                   ) -> list[tuple[AskedRun, Analysis | Exception]]:
    """One pass for the batch's runs, and each run's analysis or the error that stopped it."""
    try:
        runs = capture_batch(loaded, [ids for _, ids in batch], prompts=[a.prompt for a, _ in batch],
                             bos=[a.bos for a, _ in batch])
    except Exception as error:  # noqa: BLE001 - every session of the batch reports it
        return [(asked, error) for asked, _ in batch]
    outcomes = []
    for (asked, _), run in zip(batch, runs):
        try:
            outcomes.append((asked, analysis_of(loaded, run, asked.typed_target, asked.target_as_written)))
        except Exception as error:  # noqa: BLE001 - the session reports it
            outcomes.append((asked, error))
    return outcomes


def batches(tokenized: list[tuple[AskedRun, list[int]]]) -> list[list[tuple[AskedRun, list[int]]]]:
    """The runs shortest first, cut into the batches of least cost (PASS_COST_TOKENS per pass plus its padded
    tokens), each within MAX_BATCH_TOKENS padded tokens and MAX_BATCH_PATTERN pattern entries per head (a run over
    either alone)."""
    ordered = sorted(tokenized, key=lambda item: len(item[1]))
    lengths = [len(ids) for _, ids in ordered]
    # least[j]: the least cost of the first j runs, and where its last batch starts
    least = [(0, 0)]
    for end in range(1, len(ordered) + 1):
        longest = lengths[end - 1]
        least.append(min((least[start][0] + PASS_COST_TOKENS + (end - start) * longest, start)
                         for start in range(end)
                         if end - start == 1 or fits((end - start), longest)))
    cuts, end = [], len(ordered)
    while end:
        cuts.append(end)
        end = least[end][1]
    starts = [0, *reversed(cuts)]
    return [ordered[start:end] for start, end in itertools.pairwise(starts)]


def fits(rows: int, longest: int) -> bool:
    """Whether a batch of ``rows`` padded to ``longest`` stays within the batch limits."""
    return rows * longest <= MAX_BATCH_TOKENS and rows * longest ** 2 <= MAX_BATCH_PATTERN
