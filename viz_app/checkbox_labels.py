"""A click on a checkbox's label text toggles the box, as an HTML ``<label>`` does: Bokeh's Checkbox draws its
label as a ``div`` beside the input, which a click passes by (the BOS switch looked broken from its text)."""

from __future__ import annotations

from pathlib import Path

from bokeh.models import CustomJS

LABEL_CLICKS_TOGGLE = (Path(__file__).parent / "static" / "label_clicks_toggle.js").read_text()


def label_clicks_toggle_checkboxes(document) -> None:
    """Make every checkbox label of ``document`` toggle its box (a model of its own: a model joins one document)."""
    document.js_on_event("document_ready", CustomJS(code=LABEL_CLICKS_TOGGLE))
