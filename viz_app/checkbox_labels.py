"""A click on a checkbox's label text toggles the box, as an HTML ``<label>`` does: Bokeh's Checkbox draws its
label as a ``div`` beside the input, which a click passes by (the BOS switch looked broken from its text)."""

from __future__ import annotations

from bokeh.models import CustomJS

# One listener for the whole page, added once the document is ready: clicks cross the widgets' shadow roots, and
# the first element of the click's path is the label that was clicked.
LABEL_CLICKS_TOGGLE = """
if (!window.rseLabelClicksToggle) {
    window.rseLabelClicksToggle = true;
    document.addEventListener("click", event => {
        const clicked = event.composedPath()[0];
        if (!(clicked instanceof Element) || !clicked.classList.contains("bk-label")) return;
        const box = clicked.previousElementSibling;
        if (box && box.matches("input[type=checkbox]") && !box.disabled) box.click();
    });
}
"""


def label_clicks_toggle_checkboxes(document) -> None:
    """Make every checkbox label of ``document`` toggle its box (a model of its own: a model joins one document)."""
    document.js_on_event("document_ready", CustomJS(code=LABEL_CLICKS_TOGGLE))
