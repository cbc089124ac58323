"""What ``panel serve viz_app`` runs for each browser session: the page's CSS, a state whose choices live in the
URL, the page itself (built in ``viz_app/page.py``), and, once the page is shown, the models and the first run."""

from pathlib import Path

import panel as pn

from layouts.state import ExplorerState
from viz_app.background import BackgroundTasks
from viz_app.page import explorer_page
from viz_app.settings import configured_models
from viz_app.startup import DeferredSession

URL_STATE = {"prompt": "prompt", "model": "model", "bos": "bos", "pinned": "pinned", "layer": "layer",
             "token": "token"}

pn.extension(raw_css=[(Path(__file__).parent / "static" / "page.css").read_text()])

state = ExplorerState(busy="Starting…")
if pn.state.location:
    pn.state.location.sync(state, URL_STATE)
session = DeferredSession(configured_models(), state)
pn.state.onload(BackgroundTasks().launcher(session.start))

explorer_page(state, session.npz_file).servable()
