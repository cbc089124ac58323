"""What ``panel serve viz_app`` runs for each browser session: the page's CSS, a state whose choices live in the
URL, the page itself (built in ``viz_app/page.py``), and, once the page is shown, the models and the first run."""

import logging
from pathlib import Path

import panel as pn
from panel.io.resources import LOCAL_DIST

from layouts.state import ExplorerState
from viz_app.background import BackgroundTasks
from viz_app.page import explorer_page, serve_page
from viz_app.server_tuning import tune_server_process
from viz_app.settings import configured_models
from viz_app.startup import DeferredSession, load_models_beyond_gc, starting_up
from viz_app.url_state import keep_choices_in_url

pn.extension(raw_css=[(Path(__file__).parent / "static" / "page.css").read_text()])


def serve_styles_from_here(doc) -> None:
    """Point Panel's stylesheets at this server even in a session that its page never rendered.

    A browser that opens its websocket after the page's own session expired (15 s unused: a slow laptop, thirty
    tabs opening at once) gets a new session made at connect time; Panel then links its stylesheets from the CDN,
    and a classroom without internet sees an unstyled page. Panel sets this same value when it renders a page.
    """
    if doc is not None and doc.session_context and "dist_url" not in doc.template_variables:
        doc.template_variables["dist_url"] = f"{pn.state.rel_path}/{LOCAL_DIST}" if pn.state.rel_path else LOCAL_DIST


tune_server_process()
serve_styles_from_here(pn.state.curdoc)
logging.getLogger("viz_app").setLevel(logging.INFO)  # the server log notes what each page's session does, as Bokeh's

if starting_up():
    load_models_beyond_gc(configured_models())
state = ExplorerState(busy="Starting…")
session = DeferredSession(configured_models(), state, pn.state.curdoc)
pn.state.onload(BackgroundTasks().launcher(session.start))
location = True  # Panel's own, for the --warm run at start-up
if pn.state.curdoc is not None and pn.state.curdoc.session_context:  # a served page
    location = keep_choices_in_url(state)
    # Bound now: the script's globals are gone by the time a session is destroyed.
    pn.state.curdoc.on_session_destroyed(lambda _context, closed=session: closed.stop_jobs())

serve_page(explorer_page(state), location)
