"""Classroom sessions driven by a script instead of a browser: each student is a Bokeh client session (the protocol
BokehJS speaks) in its own thread, sending the same prompt edit, Run click and tab switch a browser sends and
reading the server's patches into its own copy of the page's document.

Students' browsers render on their own machines; a class's Chromium pages on the server's cores would measure
their rendering, not the server. "Updated" here is the moment the session's document holds the run: the
status line and every figure title of the norms tab name its token count. Nothing is drawn.
"""

from __future__ import annotations

import json
import re
import threading
import time
from urllib.parse import quote_plus

import panel  # noqa: F401 - registers Panel's Bokeh models, which the pulled document holds
from bokeh.client import ClientSession, pull_session
from bokeh.document import Document
from bokeh.document.events import MessageSentEvent
from bokeh.events import ButtonClick, DocumentReady, Event
from bokeh.models import Button, ImportedStyleSheet, Tabs, TextInput
from panel.models.location import Location
from panel.models.markup import HTML

from page_driving.classroom import SessionOutcome, SessionPlan
from page_driving.locators import FIGURES_BY_TAB, NORMS_TAB, PROMPT_BOX_PLACEHOLDER

TIMEOUT_SECONDS = 300
CARD_TAB = "Block diagram"


class ScriptSession:
    """One student's page as a Bokeh client session: its document and the blocking loop that applies patches."""

    def __init__(self, url: str, plan: SessionPlan):
        self.plan = plan
        self.session: ClientSession = pull_session(url=url, arguments={"pinned": json.dumps([plan.pinned])})
        self.doc: Document = self.session.document
        self.errors: list[str] = []
        self.session._handle_patch = self.patch_applier(self.session._handle_patch)
        self.location = self.model(lambda m: isinstance(m, Location))
        self.status_line = self.prompt_box = self.run_button = self.tabs = None  # on the page once it is shown
        self.norms_figures = []

    def patch_applier(self, apply):
        """``apply`` that records a patch it cannot apply (what BokehJS reports as "reference isn't known") and goes
        on, instead of ending the session's loop."""
        def apply_or_record(message) -> None:
            try:
                apply(message)
            except Exception as error:  # noqa: BLE001 - reported with the session's isolation problems
                self.errors.append(f"patch not applied: {type(error).__name__}: {error}")
        return apply_or_record

    def send(self, event: Event) -> None:
        """Send a UI event (a click, the page being ready) as BokehJS does: a message in a document patch."""
        self.doc.callbacks.trigger_on_change(MessageSentEvent(self.doc, "bokeh_event", event))

    def wait_until(self, condition, what: str) -> None:
        """Apply the server's patches until ``condition()`` holds (a TimeoutError after TIMEOUT_SECONDS).

        Bokeh's client checks the condition after each message (``_loop_until``: it has no public call for this)."""
        connection = self.session._connection
        give_up = connection.io_loop.call_later(TIMEOUT_SECONDS, connection.io_loop.stop)
        try:
            connection._loop_until(condition)
        finally:
            connection.io_loop.remove_timeout(give_up)
        if not condition():
            raise TimeoutError(f"no {what} within {TIMEOUT_SECONDS} s")

    def page_found(self) -> bool:
        """Whether the page, made once it is shown, has come: then its controls and tabs are found."""
        try:
            self.status_line = next(text for text in self.html_texts() if "status-line" in text.text)
            self.prompt_box = self.model(lambda m: isinstance(m, TextInput)
                                         and m.placeholder == PROMPT_BOX_PLACEHOLDER)
            self.run_button = self.model(lambda m: isinstance(m, Button) and m.label == "Run")
            self.tabs = self.model(lambda m: isinstance(m, Tabs))
        except StopIteration:
            return False
        return True

    def model(self, predicate):
        """The document's first model that satisfies ``predicate`` (models are found once: a scan per patch would
        cost a class's client threads more than the server's work)."""
        return next(model for model in self.doc.models if predicate(model))

    def status(self) -> str:
        return self.status_line.text

    def idle(self) -> bool:
        """The status line shows a finished run and no work in progress (busy messages end with an ellipsis)."""
        return " tokens " in self.status() and "…" not in self.status()

    def show_tab(self, title: str) -> None:
        self.tabs.active = [tab.title for tab in self.tabs.tabs].index(title)

    def norms_titles_name(self, n_tokens: int) -> bool:
        """Every figure of the norms tab names ``n_tokens`` tokens in its title."""
        return all(re.search(rf"(^|\D){n_tokens} tokens", figure.title.text or "") for figure in self.norms_figures)

    def open(self) -> None:
        """Say the page is ready (which starts the session's first run), wait for it, then show the norms tab."""
        self.send(DocumentReady())
        self.wait_until(self.page_found, "the sidebar and the tabs")
        self.wait_until(self.idle, "first run")
        self.show_tab(NORMS_TAB)
        self.wait_until(lambda: all(self.doc.select_one({"name": name}) for name in FIGURES_BY_TAB[NORMS_TAB]),
                        "norms figures")
        self.norms_figures = [self.doc.select_one({"name": name}) for name in FIGURES_BY_TAB[NORMS_TAB]]

    def type_prompt(self) -> None:
        """Type the plan's prompt, then ask the server for its info: it answers a connection's messages in order,
        so the answer comes once it has taken the prompt (the page writes a prompt into its URL only once it runs)."""
        self.prompt_box.value = self.plan.prompt
        self.session.request_server_info()

    def run_until_updated(self) -> float:
        """Click Run; seconds until the status line, the norms figures and the URL hold this run."""
        started = time.perf_counter()
        self.send(ButtonClick(self.run_button))
        n_tokens = self.plan.n_tokens
        echo = f"prompt={quote_plus(self.plan.prompt)}&"
        self.wait_until(lambda: f" {n_tokens} tokens " in self.status() and self.norms_titles_name(n_tokens)
                        and echo in self.location.search + "&", "updated norms tab")
        return time.perf_counter() - started

    def isolation_problems(self) -> list[str]:
        """What the session's document holds that is not its own: prompt, status, norms tokens, pinned card."""
        plan, problems = self.plan, list(self.errors)
        if remote := sorted({sheet.url for sheet in self.doc.models if isinstance(sheet, ImportedStyleSheet)
                             and not sheet.url.startswith(("static/", "./", "/"))}):
            problems.append(f"stylesheets from outside the server (no network in a classroom): {remote[:3]}")
        if (prompt := self.prompt_box.value) != plan.prompt:
            problems.append(f"prompt box holds {prompt!r}")
        if f" {plan.n_tokens} tokens " not in self.status():
            problems.append(f"status line reads {self.status()!r}")
        labels = self.norms_figures[0].below[0].major_label_overrides
        if tuple(labels[key] for key in sorted(labels, key=int)) != plan.token_labels:
            problems.append("norms figure's token labels are not this session's")
        self.show_tab(CARD_TAB)
        self.wait_until(lambda: len(self.cards()) > 0 and f"({plan.n_tokens}, " in self.cards()[0], "pinned card")
        if len(cards := self.cards()) != 1:
            problems.append(f"{len(cards)} pinned cards, expected only {plan.pinned}")
        shown = set(re.findall(r"&lt;code&gt;(layers\.\d+\.\w+)&lt;/code&gt;", cards[0]))
        if shown != set(plan.card_names):
            problems.append(f"card of {plan.pinned} reads {sorted(shown)}, expected {list(plan.card_names)}")
        return problems

    def html_texts(self) -> list:
        """The document's HTML panes (read by type: asking a Bokeh model for a property it lacks is slow)."""
        return [model for model in self.doc.models if isinstance(model, HTML)]

    def cards(self) -> list[str]:
        return [html.text for html in self.html_texts() if "card-values" in html.text]

    def close(self) -> None:
        self.session.close()


def script_classroom(url: str, plans: list[SessionPlan]) -> list[SessionOutcome]:
    """One thread per plan: open the session, type its prompt, click Run together, then check isolation."""
    clicks = threading.Barrier(len(plans))
    outcomes: list[SessionOutcome | None] = [None] * len(plans)

    def student(i: int) -> None:
        session, seconds, problems = None, None, []
        try:
            session = ScriptSession(url, plans[i])
            session.open()
            session.type_prompt()
            clicks.wait(TIMEOUT_SECONDS)
            seconds = session.run_until_updated()
            problems = session.isolation_problems()
        except Exception as error:  # noqa: BLE001 - one student's failure is reported, the others go on
            problems.append(f"{type(error).__name__}: {error}")
            clicks.abort()
        finally:
            if session is not None:
                session.close()
        outcomes[i] = SessionOutcome(seconds, problems)

    threads = [threading.Thread(target=student, args=(i,)) for i in range(len(plans))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes
