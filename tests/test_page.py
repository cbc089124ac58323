"""The served page in a real browser (Debian chromium): runs, pins cards, escapes tokens, reports errors."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

import numpy as np
from conftest import RUN_SECONDS
from PIL import Image
from playwright.sync_api import Page, expect

from layouts.style import token_axis_labels
from model_backend import capture_run
from model_backend.tokens import visible_token
from page_driving.locators import AXIS_LABELS, FIGURES_BY_TAB, FIND_VIEW, PROMPT_BOX
from page_driving.sync_steps import click_part, run_prompt, show_tab, wait_until_settled

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
PROMPT = "The capital of France is Paris, and the capital of Italy is"
expect.set_options(timeout=20_000)  # two cores, shared with model training: drawing can take seconds

TITLES = """names => names.map(name => {
    const view = Bokeh.index.query_one(v => v.model.name === name);
    return view ? view.model.title.text : null;
})"""

LAST_LENS_ROW = """() => {
    const view = Bokeh.index.query_one(v => v.model.name === "logit_lens");
    const cells = view.model.renderers.map(r => r.data_source).find(s => s.name === "logit_lens_cells").data;
    const last = cells.row[cells.row.length - 1];
    const shown = [...cells.top.keys()].filter(i => cells.row[i] === last);  // streamed a chunk at a time
    return shown.sort((a, b) => cells.position[a] - cells.position[b]).map(i => cells.top[i]);
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


def n_tokens_of(tiny_model, prompt: str) -> int:
    return capture_run(tiny_model, prompt, bos=True).seq_len


MARKED_PIXELS = 500  # a figure's plot area shows at least this many pixels of its marks: cells, text, lines, bars

PLOT_AREA = f"""name => {{
    const view = ({FIND_VIEW})(name);
    view.el.scrollIntoView({{block: "center"}});
    const canvas = view.canvas_view.el.getBoundingClientRect();
    const frame = view.frame.bbox;
    const inset = 4;  // the axis lines on the frame's edges are not the figure's marks
    const top = Math.max(canvas.top + frame.top + inset, 0);
    return {{x: canvas.left + frame.left + inset, y: top, width: frame.width - 2 * inset,
             height: Math.min(canvas.top + frame.bottom - inset, window.innerHeight) - top}};
}}"""


# The patching grids paint a cell white-ish (RdBu's middle, #f7f7f7) when patching it recovers nothing, and draw no
# grid lines: on a random tiny model computing in float32 the MLP grid is all but white, and is still drawn.
PALE_CELL_GRIDS = ("patching_layer_output", "patching_attention_output", "patching_mlp_output")


def marked_pixels(page: Page, name: str) -> int:
    """How many pixels of the named figure's plot area, as it is on screen, are coloured or dark: its marks (cells,
    boxes, lines, bars, text in cells) count, its white background and light grey grid lines do not. In a grid of
    ``PALE_CELL_GRIDS`` every pixel painted other than white counts."""
    png = page.screenshot(clip=page.evaluate(PLOT_AREA, name))
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    if name in PALE_CELL_GRIDS:
        return int((pixels.min(axis=2) < 252).sum())
    return int(((pixels.max(axis=2) - pixels.min(axis=2) > 40) | (pixels.min(axis=2) < 200)).sum())


def assert_the_tab_shows_the_run(page: Page, tab: str, n_tokens: int) -> None:
    """What a person sees on the open tab: every figure's title names the run's token count (the block diagram's,
    its architecture), and every figure's plot area shows its marks, not a blank canvas."""
    names = list(FIGURES_BY_TAB[tab])
    for name, title in zip(names, page.evaluate(TITLES, names)):
        if name == "block_diagram":
            assert "architecture" in title, (name, title)
        else:
            assert re.search(rf"(^|\D){n_tokens} tokens", title), (name, title)
        marked = marked_pixels(page, name)
        assert marked >= MARKED_PIXELS, (name, marked)


def test_a_run_updates_every_view(page_with_checks, tiny_model):
    page = page_with_checks
    expect(page.locator(".model-report")).to_contain_text("gpt2: not cached")
    n_tokens = n_tokens_of(tiny_model, PROMPT)
    run_prompt(page, PROMPT, n_tokens)
    ARTIFACTS.mkdir(exist_ok=True)
    for tab in FIGURES_BY_TAB:
        show_tab(page, tab, n_tokens)
        page.screenshot(path=ARTIFACTS / f"page-{tab.lower().replace(' ', '-').replace('&', 'and')}.png")
        page.mouse.move(0, 0)  # no tooltip over the figures
        assert_the_tab_shows_the_run(page, tab, n_tokens)
    show_tab(page, "Block diagram")


def test_clicking_a_block_pins_its_card(page_with_checks):
    page = page_with_checks
    click_part(page, "block.1")
    card = page.locator(".part-card").filter(has_text="layers.1.layer_output")
    expect(card).to_contain_text("blocks.1.hook_resid_post")
    expect(card).to_contain_text("Identity check")
    click_part(page, "attention.1", pinned=("block.1",))
    expect(page.locator(".part-card").filter(has_text="blocks.1.hook_attn_out")).to_be_visible()
    page.screenshot(path=ARTIFACTS / "page-cards.png")
    card.get_by_role("button", name="✕ unpin").click()
    expect(page.locator(".part-card").filter(has_text="blocks.1.hook_resid_post")).to_have_count(0)
    click_part(page, "final_norm", pinned=("attention.1",))
    expect(page.locator(".part-card").filter(has_text="ln_final.hook_normalized")).to_be_visible()


def test_a_shared_link_restores_prompt_block_and_cards(page_with_checks, browser, tiny_model):
    page = page_with_checks
    run_prompt(page, "Shared links work", n_tokens_of(tiny_model, "Shared links work"))
    click_part(page, "block.2")
    expect(page.locator(".part-card").filter(has_text="blocks.2.hook_resid_post")).to_be_visible()
    expect(page).to_have_url(re.compile("pinned=.*block.2"))
    second = browser.new_page(viewport={"width": 1366, "height": 768})
    second.goto(page.url)
    expect(second.locator(".status-line")).to_contain_text(" 5 tokens ", timeout=RUN_SECONDS)
    expect(second.locator(".part-card").filter(has_text="blocks.2.hook_resid_post")).to_be_visible()
    expect(second.locator(PROMPT_BOX)).to_have_value("Shared links work")
    expect(second.locator(".status-line")).not_to_contain_text("…", timeout=RUN_SECONDS)
    second.wait_for_timeout(300)
    second.close()



def test_last_lens_row_is_the_model_argmax(page_with_checks, tiny_model):
    page = page_with_checks
    run = capture_run(tiny_model, PROMPT, bos=True)
    run_prompt(page, PROMPT, run.seq_len)
    show_tab(page, "Logit lens", run.seq_len)
    expected = [visible_token(tiny_model.tokenizer.decode([int(i)])) for i in np.argmax(run.logits, axis=-1)]
    page.wait_for_function(f"() => ({LAST_LENS_ROW})().length === {run.seq_len}")  # the positions off screen too
    assert page.evaluate(LAST_LENS_ROW) == expected
    expect(page.locator(".lens-check")).to_contain_text("the last row is the model's logits")


LENS_GRID = f"""() => {{
    const view = ({FIND_VIEW})("logit_lens");
    const box = view.el.getBoundingClientRect();
    const cells = view.model.renderers.map(r => r.data_source).find(s => s.name === "logit_lens_cells").data;
    return {{x: box.x + box.width / 2, y: box.y + box.height / 2, start: view.model.x_range.start,
             end: view.model.x_range.end, positions: [...new Set(cells.position)]}};
}}"""


def test_dragging_the_lens_grid_shows_earlier_positions_read(page_with_checks, tiny_model):
    page = page_with_checks
    prompt = " ".join(["word"] * 40)
    n_tokens = n_tokens_of(tiny_model, prompt)
    run_prompt(page, prompt, n_tokens)
    show_tab(page, "Logit lens", n_tokens)
    grid = page.evaluate(LENS_GRID)
    assert grid["end"] == n_tokens - 0.5
    page.mouse.move(grid["x"], grid["y"])
    page.mouse.down()
    page.mouse.move(grid["x"] + 400, grid["y"], steps=10)
    page.mouse.up()
    page.mouse.move(0, 0)  # no tooltip over the screenshot
    wait_until_settled(page)
    dragged = page.evaluate(LENS_GRID)
    assert dragged["start"] < grid["start"] - 3
    shown = range(max(math.ceil(dragged["start"]), 0), math.floor(dragged["end"]) + 1)
    assert set(shown) <= set(dragged["positions"])
    page.wait_for_function(f"() => ({LENS_GRID})().positions.length === {n_tokens}", timeout=RUN_SECONDS)
    page.screenshot(path=ARTIFACTS / "page-lens-dragged.png")


def test_html_in_the_prompt_stays_text(page_with_checks, tiny_model):
    page = page_with_checks
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    prompt = "<img src=x onerror=alert(1)> and <b>bold</b>"
    run = capture_run(tiny_model, prompt, bos=True)
    run_prompt(page, prompt, run.seq_len)
    show_tab(page, "Block diagram")
    click_part(page, "token_embeddings")
    expect(page.locator(".part-card").filter(has_text="token_embeddings")).to_be_visible()
    for tab in ("Norms & sinks", "Cosine similarity", "Logit lens"):  # the tabs that put tokens in HTML
        show_tab(page, tab, run.seq_len)
        if tab == "Norms & sinks":  # the prompt's markup is read as its tokens' text on the tokens axis
            labels = page.evaluate(AXIS_LABELS, "norms_heatmap")
            assert labels == list(token_axis_labels(run.tokens).values()) and "1:<" in labels, labels
    expect(page.locator(PROMPT_BOX)).to_have_value(prompt)
    assert page.evaluate(INJECTED_IMAGES) == 0
    assert not dialogs


def test_an_empty_prompt_shows_a_message_and_the_page_still_works(page_with_checks, tiny_model):
    page = page_with_checks
    box = page.locator(PROMPT_BOX)
    box.fill("")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.locator(".error-line")).to_contain_text("empty")
    run_prompt(page, "Back to work", n_tokens_of(tiny_model, "Back to work"))
    expect(page.locator(".error-line")).to_have_count(0)
