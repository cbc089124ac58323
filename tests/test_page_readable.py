"""What a person sees at 1024x768: the diagram names the model's architecture and draws the residual spine, its ⊕
and a logits box with a card; the attribution's tick labels keep apart, its legend sits outside the plot and a
clicked bar stays outlined; no figure's title (or note under it) runs past its figure's right edge, in presenter mode
either, where the tab headers take at most two rows and each tab's first figure starts on the first screen."""

from __future__ import annotations

import test_page_fit
from conftest import RUN_SECONDS
from playwright.sync_api import expect
from test_page import ARTIFACTS, PROMPT, n_tokens_of
from test_page_attribution import BAR_CENTER, SHOWN_BARS, largest
from test_page_fit import SIDEWAYS_SCROLL, SMALL, open_page, open_presenting

from page_driving.locators import FIGURES_BY_TAB
from page_driving.sync_steps import click_part, run_prompt, show_tab

small_page = test_page_fit.small_page  # the 1024x768 page fixture

DIAGRAM_MARKS = """() => {
    const view = Bokeh.index.query_one(v => v.model.name === "block_diagram");
    const named = name => view.model.renderers.find(r => r.name === name);
    const parts = view.model.renderers.map(r => r.data_source).find(s => s.name === "block_diagram_parts").data;
    const canvas = view.canvas_view.el.getBoundingClientRect();
    const i = parts.part.indexOf("logits");
    return {title: view.model.title.text, labels: [...parts.label], spine: Boolean(named("residual_spine")),
            adds: named("residual_adds") ? named("residual_adds").data_source.data.x.length : 0,
            logits_bottom: canvas.top + view.frame.y_scale.compute(parts.y[i] - parts.height[i] / 2)};
}"""

ATTRIBUTION_AXIS = """() => {
    const view = Bokeh.index.query_one(v => v.model.name === "logit_attribution");
    const ticks = view.model.below[0].ticker.ticks.map(t => view.frame.x_scale.compute(t));
    const gaps = ticks.slice(1).map((t, i) => t - ticks[i]);
    return {ticks: ticks.length, min_gap: Math.min(...gaps), plot_width: view.frame.bbox.width,
            legend_above: view.model.above.some(m => m.name === "attribution_legend"),
            selected: view.model.renderers.map(r => r.data_source).find(s => s.name === "attribution_bars")
                .selected.indices.length};
}"""

TITLE_OVERFLOW = """names => names.map(name => {
    const view = Bokeh.index.query_one(v => v.model.name === name);
    const context = document.createElement("canvas").getContext("2d");
    const titles = [view.model.title, ...view.model.above, ...view.model.below].filter(m => m.type === "Title");
    const widest = Math.max(...titles.flatMap(title => {
        context.font = `${title.text_font_style} ${title.text_font_size} ${title.text_font}`;
        return title.text.split("\\n").map(line => context.measureText(line).width);
    }));
    return [name, view.frame.bbox.left + widest - view.bbox.width];
}).filter(([, overflow]) => overflow > 0)"""

FIGURE_TOP = """name => Bokeh.index.query_one(v => v.model.name === name).el.getBoundingClientRect().top"""


def test_the_diagram_names_its_architecture_and_draws_the_spine_and_the_logits(small_page, served_app, tiny_model):
    page = small_page
    open_page(page, served_app.url)
    show_tab(page, "Block diagram")
    n_layers = tiny_model.model.config.n_layer
    marks = page.evaluate(DIAGRAM_MARKS)
    assert marks["title"].startswith(f"GPT-2 architecture · {n_layers} blocks"), marks["title"]
    assert marks["spine"] and marks["adds"] == 2 * n_layers, marks
    assert "logits" in marks["labels"] and marks["logits_bottom"] <= SMALL["height"], marks
    click_part(page, "logits")
    card = page.locator(".part-card").filter(has_text="One score per vocabulary token")
    expect(card).to_contain_text("Next token")
    expect(card).to_contain_text("TransformerLens")


def test_the_attribution_axis_legend_and_a_clicked_bar_read_at_a_glance(small_page, served_app, tiny_model):
    page = small_page
    open_page(page, served_app.url)
    n_tokens = n_tokens_of(tiny_model, PROMPT)
    run_prompt(page, PROMPT, n_tokens)
    show_tab(page, "Logit attribution", n_tokens)
    axis = page.evaluate(ATTRIBUTION_AXIS)
    assert axis["ticks"] >= 3 and axis["min_gap"] >= 30, axis
    assert axis["legend_above"], axis
    shown = page.evaluate(SHOWN_BARS)
    point = page.evaluate(BAR_CENTER, largest(shown["labels"], shown["terms"]))
    page.mouse.click(point["x"], point["y"])
    expect(page.locator(".attribution-pinned")).to_be_visible()
    page.wait_for_function(f"() => ({ATTRIBUTION_AXIS})().selected === 1", timeout=RUN_SECONDS)


def test_no_figure_title_is_wider_than_its_figure(small_page, served_app, tiny_model):
    page = small_page
    open_page(page, served_app.url)
    n_tokens = n_tokens_of(tiny_model, PROMPT)
    run_prompt(page, PROMPT, n_tokens)
    for tab, names in FIGURES_BY_TAB.items():
        show_tab(page, tab, n_tokens)
        page.screenshot(path=ARTIFACTS / f"titles-{tab.lower().replace(' ', '-').replace('&', 'and')}.png")
        assert page.evaluate(TITLE_OVERFLOW, list(names)) == [], tab


def test_presenter_mode_fits_1024_by_768(small_page, served_app, tiny_model):
    page = small_page
    n_tokens = n_tokens_of(tiny_model, PROMPT)
    open_presenting(page, served_app.url, PROMPT, n_tokens)
    headers = page.locator(".bk-tab")
    rows = {round(headers.nth(i).bounding_box()["y"]) for i in range(headers.count())}
    assert len(rows) <= 2, rows
    for tab, names in FIGURES_BY_TAB.items():
        show_tab(page, tab, n_tokens)
        page.screenshot(path=ARTIFACTS / f"presenter-{tab.lower().replace(' ', '-').replace('&', 'and')}.png")
        assert page.evaluate(TITLE_OVERFLOW, list(names)) == [], tab
        assert page.evaluate(FIGURE_TOP, names[0]) <= SMALL["height"], tab
        assert page.evaluate(SIDEWAYS_SCROLL) <= 0, tab
