"""What ``panel serve viz_app`` runs for each browser session: the page's CSS, a state whose choices live in the
URL, the page itself (built in ``viz_app/page.py``), and, once the page is shown, the models and the first run."""

from pathlib import Path

import panel as pn
from panel.io.resources import LOCAL_DIST

from layouts.state import ExplorerState
from viz_app.background import BackgroundTasks
from viz_app.page import explorer_page
from viz_app.settings import configured_models
from viz_app.startup import DeferredSession

URL_STATE = {"prompt": "prompt", "model": "model", "bos": "bos", "pinned": "pinned", "layer": "layer",
             "token": "token"}

pn.extension(raw_css=[(Path(__file__).parent / "static" / "page.css").read_text()])


def serve_styles_from_here(doc) -> None:
    """Point Panel's stylesheets at this server even in a session that its page never rendered.

    A browser that opens its websocket after the page's own session expired (15 s unused: a slow laptop, thirty
    tabs opening at once) gets a new session made at connect time; Panel then links its stylesheets from the CDN,
    and a classroom without internet sees an unstyled page. Panel sets this same value when it renders a page.
    """
    if doc is not None and doc.session_context and "dist_url" not in doc._template_variables:
        doc._template_variables["dist_url"] = f"{pn.state.rel_path}/{LOCAL_DIST}" if pn.state.rel_path else LOCAL_DIST


serve_styles_from_here(pn.state.curdoc)

state = ExplorerState(busy="Starting…")
if pn.state.location:
    pn.state.location.sync(state, URL_STATE)
session = DeferredSession(configured_models(), state)
pn.state.onload(BackgroundTasks().launcher(session.start))

explorer_page(state, session.npz_file).servable()
