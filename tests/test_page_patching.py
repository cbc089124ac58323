"""The Patching tab in a real browser on the tiny GPT-2: the corrupted prompt prefilled by one swapped word and kept in
the URL, the three grids filled block by block with the backend's own numbers, the two exactness checks shown, a
click on a cell pins its card, and a corrupted prompt of another length is refused with both counts."""

from __future__ import annotations

import re

import numpy as np
from playwright.sync_api import Page, expect

from layouts.corrupted_prompt import corrupted_version
from model_backend import activation_patching, capture_run
from model_backend.patching import PATCHED_SITES
from page_driving.locators import FIND_VIEW
from page_driving.sync_steps import run_prompt, show_tab
from test_page import ARTIFACTS, PROMPT

CELLS = """site => {
    const view = Bokeh.index.query_one(v => v.model.name === "patching_" + site);
    const cells = view.model.renderers.map(r => r.data_source).find(s => s.name === `patching_${site}_cells`).data;
    return {x: [...cells.x], y: [...cells.y], raw: [...cells.raw], title: view.model.title.text};
}"""

CELL_CENTER = f"""([site, x, y]) => {{
    const view = ({FIND_VIEW})("patching_" + site);
    view.el.scrollIntoView({{block: "center"}});
    const canvas = view.canvas_view.el.getBoundingClientRect();
    return {{x: canvas.left + view.frame.x_scale.compute(x), y: canvas.top + view.frame.y_scale.compute(y)}};
}}"""

CHECK = re.compile(r"clean run to (\d\.\de[+-]\d+); nothing patched → corrupted run to (\d\.\de[+-]\d+)")
CORRUPTED_BOX = "input[placeholder='the prompt with one word changed']"


def wait_complete(page: Page, n_tokens: int) -> None:
    """Wait until every grid's title says the run's token count and no longer says "so far"."""
    page.wait_for_function(f"""() => ["layer_output", "attention_output", "mlp_output"].every(site => {{
        const title = ({FIND_VIEW})("patching_" + site)?.model.title.text ?? "";
        return title.includes("{n_tokens} tokens") && !title.includes("so far") && !title.includes("not patched");
    }})""", timeout=60_000)


def test_the_grids_are_the_backends_and_a_cell_pins_its_card(page_with_checks, tiny_model):
    page = page_with_checks
    run = capture_run(tiny_model, PROMPT, bos=True)
    corrupted = corrupted_version(PROMPT)
    assert corrupted != PROMPT
    expected = activation_patching(tiny_model, PROMPT, corrupted, bos=True)
    run_prompt(page, PROMPT, run.seq_len)
    show_tab(page, "Patching", run.seq_len)
    wait_complete(page, run.seq_len)
    expect(page.locator(CORRUPTED_BOX)).to_have_value(corrupted)
    assert "corrupted_prompt=" in page.url
    metric = page.locator(".patching-metric").inner_text()
    assert f"clean run {expected.pair.clean_metric:.3f}" in metric
    assert "␣" in metric  # the tokens are shown with their space visible
    clean_check, corrupted_check = map(float, CHECK.search(page.locator(".patching-check").inner_text()).groups())
    assert clean_check <= 1e-4 and corrupted_check <= 1e-4
    for site in PATCHED_SITES:
        shown = page.evaluate(CELLS, site)
        grid = np.full((run.n_layers, run.seq_len), np.nan)
        grid[shown["y"], shown["x"]] = shown["raw"]
        np.testing.assert_allclose(grid, expected.grids[site], atol=1e-4, err_msg=site)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "page-patching.png", full_page=True)

    layer = run.n_layers - 1
    point = page.evaluate(CELL_CENTER, ["mlp_output", 2, layer])
    page.mouse.click(point["x"], point["y"])
    expect(page.locator(".patching-pinned")).to_contain_text(f"layers.{layer}.mlp_output")
    show_tab(page, "Block diagram")
    expect(page.locator(".part-card").filter(has_text=f"layers.{layer}.mlp_output")).to_be_visible()


def test_a_corrupted_prompt_of_another_length_is_refused_and_the_tab_recovers(page_with_checks, tiny_model):
    page = page_with_checks
    run = capture_run(tiny_model, PROMPT, bos=True)
    run_prompt(page, PROMPT, run.seq_len)
    show_tab(page, "Patching", run.seq_len)
    box = page.locator(CORRUPTED_BOX)
    box.fill(PROMPT + " and more")
    box.press("Enter")
    longer = capture_run(tiny_model, PROMPT + " and more", bos=True).seq_len
    expect(page.locator(".patching-note")).to_contain_text(
        f"the clean prompt is {run.seq_len} tokens and the corrupted prompt {longer}")
    box.fill(PROMPT.replace("Paris", "Rome"))
    box.press("Enter")
    wait_complete(page, run.seq_len)
    assert "Rome" in page.url
