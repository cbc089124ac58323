"""The lesson panel above the tabs: a button that starts the guided lessons, then each step's title, its text with
this run's numbers, and back, next and end buttons."""

from __future__ import annotations

import html

import panel as pn

from .lesson_text import LESSON_TITLES
from .state import ExplorerState

# Back, next and end: labelled in full on a wide screen; in presenter mode the larger text leaves the title one line
# beside three short buttons (the end button keeps its name as a tooltip).
BUTTONS = {False: (("◀ Back", 110), ("Next ▶", 110), ("End lessons", 130)),
           True: (("◀", 56), ("Next ▶", 110), ("✕", 56))}
# Styles inside the title's and text's own panes (the page's stylesheet does not reach into a pane). The text is
# never a scrolling box: a step leads with its sentence and number and folds the rest under "more", so in presenter
# mode's large type the panel still leaves most of a 768-pixel screen to the figure it talks about.
LESSON_CSS = {False: ".lesson-title { font-size: 22px; margin: 6px 0; } .lesson-text p { margin: 4px 0; }",
              True: ".lesson-title { font-size: 22px; margin: 4px 0; } .lesson-text p { margin: 4px 0; } "
                    ".lesson-text { font-size: 22px; line-height: 1.3; } .lesson-text summary { font-size: 20px; }"}


def lesson_heading(step: int) -> str:
    if not step:
        return ""
    return (f"<h2 class='lesson-title'>Lesson {step} of {len(LESSON_TITLES)}: "
            f"{html.escape(LESSON_TITLES[step - 1])}</h2>")


def lesson_body(step: int, text: str) -> str:
    """The step's text (HTML the lessons built, tokens escaped there), or that its numbers are being measured."""
    return f"<div class='lesson-text' data-step='{step}'>{text or '<p>Measuring this run…</p>'}</div>"


def lesson_area_classes(state: ExplorerState):
    """The classes of the column that holds the lesson panel on the page: ``lesson-area`` (kept on screen above the
    tabs, which scroll below it: see page.css) while a lesson is open."""
    return (state.param.lesson.rx() > 0).rx.where(["lesson-area"], [])


class LessonPanel(pn.viewable.Viewer):
    """Starts, steps through and ends the lessons by setting ``state.lesson``; the session does the rest."""

    def __init__(self, state: ExplorerState):
        super().__init__()
        self.state = state
        last = len(LESSON_TITLES)
        on = state.param.lesson.rx() > 0
        start = pn.widgets.Button(label="▶ Lessons: what the residual stream shows", color="success",
                                  visible=state.param.lesson.rx() == 0, width=420)
        (back_label, back_width), (next_label, next_width), (end_label, end_width) = BUTTONS[state.presenter]
        back = pn.widgets.Button(label=back_label, width=back_width, disabled=state.param.lesson.rx() <= 1,
                                 description="the previous lesson")
        forward = pn.widgets.Button(label=next_label, color="primary", width=next_width,
                                    disabled=state.param.lesson.rx() >= last)
        end = pn.widgets.Button(label=end_label, width=end_width, description="End lessons")
        start.on_click(lambda _event: self.open(1))
        back.on_click(lambda _event: self.open(max(state.lesson - 1, 1)))
        forward.on_click(lambda _event: self.open(min(state.lesson + 1, last)))
        end.on_click(lambda _event: self.open(0))
        styles = [LESSON_CSS[state.presenter]]
        heading = pn.pane.HTML(pn.bind(lesson_heading, state.param.lesson), sizing_mode="stretch_width",
                               stylesheets=styles)
        body = pn.pane.HTML(pn.bind(lesson_body, state.param.lesson, state.param.lesson_text),
                            sizing_mode="stretch_width", stylesheets=styles)
        self._layout = pn.Column(
            start,
            pn.Column(pn.Row(heading, back, forward, end, sizing_mode="stretch_width"), body,
                      visible=on, css_classes=["lesson-panel"], sizing_mode="stretch_width"),
            sizing_mode="stretch_width")

    def open(self, step: int) -> None:
        """Show step ``step`` (0: end the lessons) with its text emptied in the same change, so the page never
        shows one step's title over another's text or marks."""
        self.state.param.update(lesson=step, lesson_text="", highlight={})

    def __panel__(self) -> pn.Column:
        return self._layout
