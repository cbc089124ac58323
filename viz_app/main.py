"""Assemble the page: one state, its controller, the sidebar and one tab per view."""

from pathlib import Path

import panel as pn

from layouts.attention_view import AttentionView
from layouts.controls import SIDEBAR_WIDTH, sidebar_controls
from layouts.diagram_view import DiagramView
from layouts.intervention_view import InterventionView
from layouts.logit_lens_view import LogitLensView
from layouts.norms_view import NormsView
from layouts.similarity_view import SimilarityView
from viz_app.session import ExplorerSession
from viz_app.settings import configured_models

TABS = (("Block diagram", DiagramView), ("Norms & sinks", NormsView), ("Cosine similarity", SimilarityView),
        ("Logit lens", LogitLensView), ("Attention", AttentionView), ("Intervention", InterventionView))
URL_STATE = {"prompt": "prompt", "model": "model", "bos": "bos", "pinned": "pinned", "layer": "layer",
             "token": "token"}

pn.extension(raw_css=[(Path(__file__).parent / "static" / "page.css").read_text()])

session = ExplorerSession(configured_models())
state = session.state
if pn.state.location:
    pn.state.location.sync(state, URL_STATE)
pn.state.onload(session.launcher(session.start))

# Only the shown tab is drawn, in the browser (dynamic) and in Python (each view skips while its tab is hidden).
tabs = pn.Tabs(*[(title, View(state, tab=title)) for title, View in TABS], dynamic=True)
state.shown_tab = TABS[0][0]
tabs.param.watch(lambda event: setattr(state, "shown_tab", TABS[event.new][0]), "active")

pn.template.BootstrapTemplate(
    title="Residual Stream Explorer",
    sidebar=sidebar_controls(state, session.npz_file),
    sidebar_width=SIDEBAR_WIDTH,
    main=[tabs],
).servable()
