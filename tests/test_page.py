"""The served page in a real browser (Debian chromium): runs, pins cards, escapes tokens, reports errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from model_backend import capture_run, load_model
from model_backend.tokens import visible_token

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
PROMPT = "The capital of France is Paris, and the capital of Italy is"
FIGURES_OF_EVERY_VIEW = ("norms_heatmap", "norms_lines", "similarity_across_layers", "similarity_within_layer",
                         "laminar_profile", "logit_lens", "attention_pattern", "sink_share", "intervention")
RUN_SECONDS = 30_000

FIND_VIEW = """name => Bokeh.index.query_one(view => view.model.name === name)"""

TITLES = """names => names.map(name => {
    const view = Bokeh.index.query_one(v => v.model.name === name);
    return view ? view.model.title.text : null;
})"""

PART_CENTER = """part => {
    const view = Bokeh.index.query_one(v => v.model.name === "block_diagram");
    const source = view.model.renderers.map(r => r.data_source).find(s => s.name === "block_diagram_parts");
    const i = source.data.part.indexOf(part);
    const canvas = view.canvas_view.el.getBoundingClientRect();
    return {x: canvas.left + view.frame.x_scale.compute(source.data.x[i]),
            y: canvas.top + view.frame.y_scale.compute(source.data.y[i])};
}"""

LAST_LENS_ROW = """() => {
    const view = Bokeh.index.query_one(v => v.model.name === "logit_lens");
    const cells = view.model.renderers.map(r => r.data_source).find(s => s.name === "logit_lens_cells").data;
    const last = cells.row[cells.row.length - 1];
    return cells.top.filter((_, i) => cells.row[i] === last);
}"""

INJECTED_IMAGES = """() => {
    const found = [];
    const search = root => {
        found.push(...root.querySelectorAll("img[src=x]"));
        root.querySelectorAll("*").forEach(el => el.shadowRoot && search(el.shadowRoot));
    };
    search(document);
    return found.length;
}"""


@pytest.fixture(scope="module")
def tiny_model(tiny_gpt2_dir):
    """The same tiny model the server loads, in this process, to compute what the page should show."""
    return load_model(str(tiny_gpt2_dir))


@pytest.fixture
def page_with_checks(page: Page, served_app):
    """The page, opened and settled after its first run; fails the test on a browser console error."""
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(served_app.url)
    expect(page.locator(".status-line")).to_contain_text("tokens", timeout=RUN_SECONDS)
    yield page
    assert not errors, errors


def run_prompt(page: Page, prompt: str, n_tokens: int) -> None:
    """Type a prompt, press Enter, and wait until the status line reports its token count."""
    box = page.locator("input[placeholder='Type a prompt, press Enter']")
    box.fill(prompt)
    box.press("Enter")
    expect(page.locator(".status-line")).to_contain_text(f" {n_tokens} tokens ", timeout=RUN_SECONDS)


def n_tokens_of(tiny_model, prompt: str) -> int:
    return capture_run(tiny_model, prompt, bos=True).seq_len


def wait_for_titles(page: Page, n_tokens: int) -> None:
    page.wait_for_function(f"""() => ({TITLES})({list(FIGURES_OF_EVERY_VIEW)})
                               .every(title => title && title.includes("{n_tokens} tokens"))""",
                           timeout=RUN_SECONDS)


def test_a_run_updates_every_view(page_with_checks, tiny_model):
    page = page_with_checks
    n_tokens = n_tokens_of(tiny_model, PROMPT)
    run_prompt(page, PROMPT, n_tokens)
    wait_for_titles(page, n_tokens)
    ARTIFACTS.mkdir(exist_ok=True)
    for tab in ("Block diagram", "Norms & sinks", "Cosine similarity", "Logit lens", "Attention", "Intervention"):
        page.get_by_role("tab", name=tab).click()
        page.wait_for_timeout(400)
        page.screenshot(path=ARTIFACTS / f"page-{tab.split()[0].lower()}.png")


def test_clicking_a_block_pins_its_card(page_with_checks):
    page = page_with_checks
    page.wait_for_function(f"() => ({FIND_VIEW})('block_diagram')?.has_finished()")
    point = page.evaluate(PART_CENTER, "block.1")
    page.mouse.click(point["x"], point["y"])
    card = page.locator(".part-card").filter(has_text="layers.1.layer_output")
    expect(card).to_contain_text("blocks.1.hook_resid_post")
    expect(card).to_contain_text("Identity check")
    page.wait_for_function(f"() => ({FIND_VIEW})('block_diagram')?.has_finished()")
    page.wait_for_timeout(400)
    point = page.evaluate(PART_CENTER, "attention.1")
    page.mouse.click(point["x"], point["y"])
    expect(page.locator(".part-card").filter(has_text="blocks.1.hook_attn_out")).to_be_visible()
    page.screenshot(path=ARTIFACTS / "page-cards.png")
    card.get_by_role("button", name="✕ unpin").click()
    expect(page.locator(".part-card").filter(has_text="blocks.1.hook_resid_post")).to_have_count(0)


def test_last_lens_row_is_the_model_argmax(page_with_checks, tiny_model):
    page = page_with_checks
    run = capture_run(tiny_model, PROMPT, bos=True)
    run_prompt(page, PROMPT, run.seq_len)
    expected = [visible_token(tiny_model.tokenizer.decode([int(i)])) for i in np.argmax(run.logits, axis=-1)]
    page.wait_for_function(f"() => ({FIND_VIEW})('logit_lens') !== null")
    assert page.evaluate(LAST_LENS_ROW) == expected
    expect(page.locator(".lens-check")).to_contain_text("the last row is the model's logits")


def test_html_in_the_prompt_stays_text(page_with_checks, tiny_model):
    page = page_with_checks
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    prompt = "<img src=x onerror=alert(1)> and <b>bold</b>"
    n_tokens = n_tokens_of(tiny_model, prompt)
    run_prompt(page, prompt, n_tokens)
    wait_for_titles(page, n_tokens)
    point = page.evaluate(PART_CENTER, "token_embeddings")
    page.mouse.click(point["x"], point["y"])
    expect(page.locator(".part-card").filter(has_text="token_embeddings")).to_be_visible()
    page.get_by_role("tab", name="Norms & sinks").click()
    page.get_by_role("tab", name="Logit lens").click()
    page.wait_for_timeout(500)
    assert page.evaluate(INJECTED_IMAGES) == 0
    assert not dialogs


def test_an_empty_prompt_shows_a_message_and_the_page_still_works(page_with_checks, tiny_model):
    page = page_with_checks
    box = page.locator("input[placeholder='Type a prompt, press Enter']")
    box.fill("")
    page.get_by_role("button", name="Run").click()
    expect(page.locator(".error-line")).to_contain_text("empty")
    run_prompt(page, "Back to work", n_tokens_of(tiny_model, "Back to work"))
    expect(page.locator(".error-line")).to_have_count(0)
