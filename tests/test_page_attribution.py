"""The Logit attribution tab in a real browser: the bars sum to the model's logit, the top bar is the one the backend
computes, a click on a bar pins its card in the Block diagram tab, and a typed target stays text; and the view in
process on the Llama family, whose embeddings bar is ``layers.0.layer_input``."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from layouts.attribution_view import AttributionView
from layouts.state import ExplorerState
from model_backend import capture_run, direct_logit_attribution
from model_backend.tokens import visible_token
from test_page import ARTIFACTS, INJECTED_IMAGES, PROMPT
from page_driving.locators import TARGET_BOX
from page_driving.sync_steps import run_prompt, show_tab

SHOWN_BARS = """() => {
    const view = Bokeh.index.query_one(v => v.model.name === "logit_attribution");
    const bars = view.model.renderers.map(r => r.data_source).find(s => s.name === "attribution_bars").data;
    return {labels: [...bars.label], terms: [...bars.term]};
}"""

BAR_CENTER = """label => {
    const view = Bokeh.index.query_one(v => v.model.name === "logit_attribution");
    const bars = view.model.renderers.map(r => r.data_source).find(s => s.name === "attribution_bars").data;
    view.el.scrollIntoView({block: "center"});
    const canvas = view.canvas_view.el.getBoundingClientRect();
    const i = bars.label.indexOf(label);
    return {x: canvas.left + view.frame.x_scale.compute(bars.x[i]),
            y: canvas.top + view.frame.y_scale.compute(bars.term[i] / 2)};
}"""

CHECK = re.compile(r"Sum of the bars: (-?[\d.]+) · the model's logit: (-?[\d.]+)")


def shown_sum_and_logit(page: Page) -> tuple[float, float]:
    bars_sum, logit = CHECK.search(page.locator(".attribution-check").inner_text()).groups()
    return float(bars_sum), float(logit)


def largest(labels: list[str], terms) -> str:
    """The label of the bar with the largest |term|."""
    return max(zip(labels, terms), key=lambda pair: abs(pair[1]))[0]


def test_bars_sum_to_the_logit_and_a_click_pins_the_card(page_with_checks, tiny_model):
    page = page_with_checks
    run = capture_run(tiny_model, PROMPT, bos=True)
    expected = direct_logit_attribution(tiny_model, run)
    run_prompt(page, PROMPT, run.seq_len)
    show_tab(page, "Logit attribution", run.seq_len)
    bars_sum, logit = shown_sum_and_logit(page)
    assert abs(bars_sum - logit) <= 1e-3 * abs(logit)
    assert abs(logit - expected.logit) <= 1e-5
    shown = page.evaluate(SHOWN_BARS)
    top = largest(*expected.bars())
    assert largest(shown["labels"], shown["terms"]) == top
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "page-attribution.png")

    point = page.evaluate(BAR_CENTER, top)
    page.mouse.click(point["x"], point["y"])
    expect(page.locator(".attribution-pinned")).to_contain_text("Block diagram")
    show_tab(page, "Block diagram")
    read_value = "final_norm_output" if top == "final_norm.bias" else top
    expect(page.locator(".part-card").filter(has_text=read_value)).to_be_visible()
    page.screenshot(path=ARTIFACTS / "page-attribution-pinned.png")


def test_heads_position_and_a_typed_target(page_with_checks, tiny_model):
    page = page_with_checks
    run = capture_run(tiny_model, PROMPT, bos=True)
    run_prompt(page, PROMPT, run.seq_len)
    show_tab(page, "Logit attribution", run.seq_len)
    page.locator(".bk-Checkbox").filter(has_text="one bar per attention head").locator("input").check()
    heads_shown = f"layers.{run.n_layers - 1}.attention_output.head_{run.n_heads - 1}"
    page.wait_for_function(f"() => ({SHOWN_BARS})().labels.includes('{heads_shown}')")
    typed = "<img src=x onerror=alert(1)>"  # several tokens: refused, the shared target stays the top prediction
    target = page.locator(TARGET_BOX).locator("visible=true")
    target.fill(typed)
    target.press("Enter")
    expect(page.locator(".target-note").locator("visible=true").first).to_contain_text(f"“{typed}” is not one token")
    page.locator("select").filter(has_text="(last)").select_option(label=f"3:{visible_token(run.tokens[3])}")
    expect(page.locator(".attribution-about")).to_contain_text("at position 3")
    top = int(run.logits[-1].argmax())
    expect(page.locator(".attribution-about")).to_contain_text(f"(token {top}) at position 3")
    assert page.evaluate(INJECTED_IMAGES) == 0
    expected = direct_logit_attribution(tiny_model, run, top, position=3)
    bars_sum, logit = shown_sum_and_logit(page)
    assert abs(logit - expected.logit) <= 1e-5 and abs(bars_sum - logit) <= 1e-3 * abs(logit)
    page.screenshot(path=ARTIFACTS / "page-attribution-heads.png")


def test_the_view_draws_a_llama_attribution_and_pins_the_parts_its_bars_read(llama):
    run = capture_run(llama, PROMPT, bos=True)
    state = ExplorerState(run=run, attribution=direct_logit_attribution(llama, run))
    view = AttributionView(state, per_head=True)
    labels = view.bars.data["label"]
    xs = view.bars.data["x"]
    assert labels[0] == "layers.0.layer_input" and round(xs[0]) == -1
    heads = [x for label, x in zip(labels, xs) if label.startswith("layers.2.attention_output.head_")]
    assert heads == sorted(heads) and all(1.5 < x < 2.5 for x in heads)
    assert view.figure.xaxis[0].major_label_overrides[-1] == "emb"
    assert f"· {run.seq_len} tokens" in view.figure.title.text
    for label in ("layers.0.layer_input", "layers.2.attention_output.head_3", "layers.1.mlp_output"):
        view.pin(label)
    assert state.pinned == ["token_embeddings", "attention.2", "mlp.1"]
    assert "Block diagram" in view.pinned_note.object
