"""At 1024x768 in presenter mode, on a 30-block model and a 40-token prompt, no two tick labels of any figure overlap:
each axis shows only the labels that have room at the projector's size (Bokeh's own overlap policy), and the lens,
whose rows presenter mode keeps legible, names every one."""

from __future__ import annotations

import pytest
from conftest import assert_served_cleanly, load_as_served
from test_page import ARTIFACTS, n_tokens_of
from test_page_fit import SMALL, open_presenting

from page_driving.locators import FIGURES_BY_TAB
from page_driving.server import serve_app, stop_server
from page_driving.sync_steps import show_tab
from page_driving.tiny_models import save_tiny_gpt2

N_LAYERS = 30
PROMPT = ("The capital of France is Paris, and the capital of Germany is Berlin; the river that runs through Paris "
          "is the Seine, and the one through Berlin is the Spree")

# Paints every figure named again, recording the box of each tick label the axis draws (after its label policy
# chose them), and returns the pairs of neighbouring labels on one axis that overlap, with the labels drawn.
DRAWN_LABELS = """names => names.map(name => {
    const view = Bokeh.index.query_one(v => v.model.name === name);
    const drawn = new Map(view.axis_views.map(axis => [axis, []]));
    const originals = view.axis_views.map(axis => {
        const draw = axis._draw_oriented_labels;
        axis._draw_oriented_labels = function (ctx, labels, ...rest) {
            for (const item of labels.items) {
                const paint = item.paint;
                item.paint = function (context) {
                    drawn.get(axis).push({box: this.bbox(), text: this.text});
                    return paint.call(this, context);
                };
            }
            return draw.call(this, ctx, labels, ...rest);
        };
        return [axis, draw];
    });
    view.invalidate_painters();
    view.repaint();
    originals.forEach(([axis, draw]) => { axis._draw_oriented_labels = draw; });
    return {name, axes: [...drawn.entries()].map(([axis, labels]) => {
        const along = axis.dimension == 0 ? ["left", "right"] : ["top", "bottom"];
        const sorted = labels.filter(l => l.text !== "").sort((a, b) => a.box[along[0]] - b.box[along[0]]);
        const overlaps = sorted.slice(1).filter((l, i) => l.box[along[0]] < sorted[i].box[along[1]] - 0.5)
            .map((l, i) => [sorted[i].text, l.text]);
        return {texts: sorted.map(l => l.text), overlaps};
    })};
})"""


@pytest.fixture(scope="module")
def deep_model_dir(tmp_path_factory):
    """A tiny random-init GPT-2 with 30 blocks, as many as SmolLM2 has."""
    return save_tiny_gpt2(tmp_path_factory.mktemp("deep") / "gpt2-30", n_layer=N_LAYERS, n_embd=32)


@pytest.fixture(scope="module")
def deep_app(deep_model_dir, tmp_path_factory):
    process, app = serve_app(str(deep_model_dir), tmp_path_factory.mktemp("deep-server") / "server.log")
    yield app
    stop_server(process)
    assert_served_cleanly(app)


def test_no_tick_labels_overlap_on_30_blocks_in_presenter_mode(browser, deep_app, deep_model_dir):
    n_tokens = n_tokens_of(load_as_served(deep_model_dir), PROMPT)
    assert n_tokens >= 30
    page = browser.new_page(viewport=SMALL)
    open_presenting(page, deep_app.url, PROMPT, n_tokens)
    for tab, names in FIGURES_BY_TAB.items():
        show_tab(page, tab, n_tokens)
        page.screenshot(path=ARTIFACTS / f"presenter-30-blocks-{tab.split()[0].lower()}.png", full_page=True)
        for figure in page.evaluate(DRAWN_LABELS, list(names)):
            for axis in figure["axes"]:
                assert axis["overlaps"] == [], (tab, figure["name"], axis)
    lens_rows = next(axis["texts"] for figure in page.evaluate(DRAWN_LABELS, ["logit_lens"])
                     for axis in figure["axes"] if f"{N_LAYERS - 1} → out" in axis["texts"])
    assert "embed" in lens_rows and len(lens_rows) == N_LAYERS + 1, lens_rows  # presenter mode keeps every row
    page.close()
