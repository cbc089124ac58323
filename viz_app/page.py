"""The page, built the same way for ``panel serve`` and for a notebook: the sidebar's controls beside one tab per
view, all bound to one session's state."""

from __future__ import annotations

import panel as pn
from panel.io.location import Location

from layouts.attention_view import AttentionView
from layouts.attribution_view import AttributionView
from layouts.controls import SIDEBAR_WIDTH, sidebar_controls
from layouts.diagram_view import DiagramView
from layouts.flow_tab import FlowTab
from layouts.intervention_view import InterventionView
from layouts.lesson_view import LessonPanel, lesson_area_classes
from layouts.logit_lens_view import LogitLensView
from layouts.norms_view import NormsView
from layouts.patching_view import PatchingView
from layouts.run_summary import next_tokens_panel, stale_banner
from layouts.similarity_view import SimilarityView
from layouts.state import ExplorerState
from layouts.writing_view import WritingView

from .checkbox_labels import label_clicks_toggle_checkboxes

TITLE = "Residual Stream Explorer"
TABS = (("Block diagram", DiagramView), ("Write", WritingView), ("Norms & sinks", NormsView),
        ("Cosine similarity", SimilarityView), ("Logit lens", LogitLensView), ("Logit attribution", AttributionView),
        ("Attention", AttentionView), ("Flow", FlowTab), ("Intervention", InterventionView),
        ("Patching", PatchingView))
# Every tab reachable at 1024 pixels, none scrolled away, the ten headers on two rows beside the sidebar.
TAB_HEADERS_WRAP = (".bk-headers-wrapper { flex-wrap: wrap; } "
                    ".bk-tab { padding-left: 12px !important; padding-right: 12px !important; }")
# Presenter mode's tab headers: as large as the least text, all seven on two rows at 1024 pixels.
PRESENTER_TAB_HEADERS = ".bk-tab { font-size: 20px; padding: 3px 10px !important; }"
# Presenter mode: no text under 20 pixels (the widgets' 0.8rem included; the sizes are page.css's variables, which reach
# inside every pane), code as large as the text around it, and a slim header, so the figures get the screen's height.
PRESENTER_CSS = """
:root { font-size: 25px; --bokeh-font-size: 20px; --code-size: 1em; --status-size: 22px; --detail-size: 20px; }
#header { padding: 0 8px; }
#header .title { font-size: 22px; line-height: 1.6; }
"""


def explorer_tabs(state: ExplorerState) -> pn.Tabs:
    """One tab per view. A view builds its figures when its tab is first shown, fills them and only then hands them
    to the page; later runs update them in place, only while the tab is shown.

    Not Panel's dynamic tabs: they take a tab's models off the page when it is hidden and put them back when shown,
    and a view's changes made then could reach the browser before those models (seen as "reference isn't known"
    with five pages at once).
    """
    state.shown_tab = TABS[0][0]
    stylesheets = [TAB_HEADERS_WRAP, *([PRESENTER_TAB_HEADERS] if state.presenter else [])]
    tabs = pn.Tabs(*[(title, View(state, tab=title)) for title, View in TABS], sizing_mode="stretch_width",
                   stylesheets=stylesheets)
    tabs.param.watch(lambda event: setattr(state, "shown_tab", TABS[event.new][0]), "active")
    titles = [title for title, _ in TABS]

    def open_shown_tab(event) -> None:
        """A lesson names the tab it talks about; the tabs open it."""
        if event.new in titles:
            tabs.active = titles.index(event.new)
    state.param.watch(open_shown_tab, "shown_tab")
    return tabs


def run_summary(state: ExplorerState) -> pn.Column:
    """The next-token panel and the previous-run warning, above every tab."""
    return pn.Column(pn.pane.HTML(pn.bind(stale_banner, state.param.stale, state.param.run), margin=(0, 10)),
                     pn.pane.HTML(pn.bind(next_tokens_panel, state.param.next_tokens), margin=(0, 10)),
                     sizing_mode="stretch_width")


def explorer_page(state: ExplorerState) -> pn.template.BootstrapTemplate:
    """The served page: the sidebar's controls and the tabs in Bootstrap's page layout (in presenter mode the sidebar
    starts folded away, one click on the header's toggle from its controls, and the tabs take the screen's width).

    Their contents are made once a browser shows the page: a page fetched and never opened, which the server keeps
    until its session expires, then holds Bootstrap's template alone. Every full garbage collection walks every
    object of every page kept, holding the event loop, so unopened pages would stall every student at each
    collection (``benchmarks/fuzz_server.py`` measures the longest stall). The lesson
    panel's column stays a root of the main area: the page's stylesheet stacks it above the tabs' column, which
    scrolls on its own.

    Without the template's busy spinner: Panel keeps every session's spinner in one process-wide list and sets all
    of them whenever any session's callback starts or ends, so each click costs an update per session. The
    sidebar's progress bar and status line say what this session is doing.
    """
    template = pn.template.BootstrapTemplate(
        title=TITLE, sidebar_width=SIDEBAR_WIDTH, busy_indicator=None, collapsed_sidebar=state.presenter,
        sidebar=[made_once_shown(lambda: sidebar_controls(state))],
        main=[made_once_shown(lambda: [LessonPanel(state)], css_classes=lesson_area_classes(state)),
              made_once_shown(lambda: [run_summary(state), explorer_tabs(state)], css_classes=["tabs-area"])])
    if state.presenter:
        template.config.raw_css.append(PRESENTER_CSS)
    return template


def made_once_shown(make, **options) -> pn.Column:
    """A column, full width, that ``make()`` fills once a browser shows the page (at once outside a server).

    Each column is filled in its own turn of the event loop: the sidebar, the lesson panel and the tabs made in the
    one call that shows the page held every other student's page for all of it (``benchmarks/fuzz_server.py``
    measures the longest stall).
    """
    column = pn.Column(sizing_mode="stretch_width", **options)

    def fill() -> None:
        column.objects = list(make())
    pn.state.onload(lambda: pn.state.execute(fill, schedule=True))
    return column


def serve_page(page: pn.template.BaseTemplate, location: Location | bool = True) -> None:
    """Add the page to this session's document, with its ``location`` (``keep_choices_in_url``'s, else Panel's own),
    the document's model index rebuilt once, at the end.

    Bokeh rebuilds the index of every model in a document each time a root is added, and the template adds about
    twenty roots: one rebuild instead of twenty shortens the event loop's hold while a page is built
    (``benchmarks/classroom_load.py`` measures the class it holds up).
    """
    with pn.state.curdoc.models.freeze():
        page.servable(location=location)
    label_clicks_toggle_checkboxes(pn.state.curdoc)


def explorer_inline(state: ExplorerState) -> pn.Row:
    """The same controls and tabs side by side, for a notebook cell (a template takes a whole browser page)."""
    return pn.Row(pn.Column(*sidebar_controls(state), width=SIDEBAR_WIDTH),
                  pn.Column(run_summary(state), explorer_tabs(state)))
