"""The Write tab in a real browser on the tiny GPT-2: the tokens the page writes are the backend's greedy ones, the
written text becomes the run every tab shows (its positions marked on the token axes), the commitment strip is
drawn and a click on it opens the logit lens, a steering shows the plain continuation beside it with the α = 0
check, branches part where the backend's do and an alternative continues one (a link writes them all again), and
bad settings are refused with a message while the page stays usable."""

from __future__ import annotations

import json
import re
from dataclasses import replace

from conftest import RUN_SECONDS
from playwright.sync_api import Page, expect

from model_backend.branches import BranchStart, continue_from, parting_step
from model_backend.generation import WriteSettings, generate_tokens
from model_backend.steering import Steering, steering_for
from model_backend.tokens import encode_prompt, token_strings, visible_token
from page_driving.locators import AXIS_LABELS, FIND_VIEW
from page_driving.sync_steps import run_prompt, show_tab
from test_page import ARTIFACTS

PROMPT = "The capital of France is"
NEW_TOKENS = 6
STRIP_CELLS = f"""() => [...(({FIND_VIEW})("commitment_strip")?.model.renderers[0].data_source.data.token ?? [])]"""
STRIP_CELL_CENTER = f"""index => {{
    const view = ({FIND_VIEW})("commitment_strip");
    view.el.scrollIntoView({{block: "center"}});
    const canvas = view.canvas_view.el.getBoundingClientRect();
    return {{x: canvas.left + view.frame.x_scale.compute(index), y: canvas.top + view.frame.y_scale.compute(0)}};
}}"""


def field(page: Page, label: str):
    """The Write tab's input under ``label``."""
    return page.locator(".bk-input-group", has_text=label).locator("input").first


def set_field(page: Page, label: str, value) -> None:
    box = field(page, label)
    box.fill(str(value))
    box.press("Enter")
    page.wait_for_timeout(300)


def write(page: Page) -> None:
    """Press Write and wait until the text is captured in one pass."""
    page.get_by_role("button", name="Write").click()
    expect(page.locator(".write-status")).to_contain_text("captured in one pass", timeout=60_000)
    expect(page.locator(".status-line")).not_to_contain_text("…", timeout=60_000)


def test_the_page_writes_the_backend_s_tokens_and_every_tab_shows_them(page_with_checks, tiny_model):
    page = page_with_checks
    prompt_ids = encode_prompt(tiny_model, PROMPT, bos=True)
    expected = generate_tokens(tiny_model, prompt_ids, WriteSettings(max_new_tokens=NEW_TOKENS))
    written = [visible_token(token) for token in token_strings(tiny_model, expected.generated_ids.tolist())]
    run_prompt(page, PROMPT, len(prompt_ids))
    page.locator(".bk-tab", has_text="Write").click()
    set_field(page, "new tokens", NEW_TOKENS)
    write(page)
    total = len(prompt_ids) + len(expected.generated_ids)
    expect(page.locator(".status-line")).to_contain_text(f" {total} tokens ")
    expect(page.locator(".status-line")).to_contain_text(f"{len(expected.generated_ids)} written")
    page.wait_for_function(f"() => ({STRIP_CELLS})().length === {len(written)}", timeout=30_000)
    assert page.evaluate(STRIP_CELLS) == written
    assert f"max_new_tokens={NEW_TOKENS}" in page.url and "write=true" in page.url
    student = page.context.new_page()  # the teacher's link on another device writes the same tokens
    student.goto(page.url)
    expect(student.locator(".status-line")).to_contain_text(f"{len(expected.generated_ids)} written", timeout=60_000)
    student.locator(".bk-tab", has_text="Write").click()
    student.wait_for_function(f"() => ({STRIP_CELLS})().length === {len(written)}", timeout=30_000)
    assert student.evaluate(STRIP_CELLS) == written
    student.close()
    assert page.locator(".write-steps tr").count() == len(written) + 1  # a row per step, and the header
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "page-write.png", full_page=True)

    show_tab(page, "Norms & sinks", total)
    labels = page.evaluate(AXIS_LABELS, "norms_heatmap")
    assert len(labels) == total
    assert all("»" in label for label in labels[len(prompt_ids):]) and not any("»" in label for label in
                                                                                  labels[:len(prompt_ids)])

    for _ in range(2):  # the same token clicked again opens the lens again
        page.locator(".bk-tab", has_text="Write").click()
        click_strip_cell(page, 0)
        # the lens tab's first showing builds its figures before the tab opens: on loaded shared cores, seconds
        expect(page.locator(".bk-tab.bk-active")).to_have_text("Logit lens", timeout=RUN_SECONDS)


def click_strip_cell(page: Page, index: int) -> None:
    """Click the commitment strip's cell ``index`` once the strip is drawn and scrolled into view."""
    page.wait_for_function(f"() => ({FIND_VIEW})('commitment_strip')?.has_finished()", timeout=30_000)
    page.evaluate(STRIP_CELL_CENTER, index)  # scrolls the strip into view; its place is read once the scroll is done
    page.wait_for_timeout(500)
    point = page.evaluate(STRIP_CELL_CENTER, index)
    page.mouse.click(point["x"], point["y"])


def test_a_steered_continuation_is_shown_beside_the_plain_one_with_its_check(page_with_checks, tiny_model):
    page = page_with_checks
    prompt_ids = encode_prompt(tiny_model, PROMPT, bos=True)
    steering = Steering(1, " big dog", " cat", 8.0)
    vector = steering_for(tiny_model, steering, bos=True)
    steered = generate_tokens(tiny_model, prompt_ids, WriteSettings(max_new_tokens=NEW_TOKENS), vector)
    run_prompt(page, PROMPT, len(prompt_ids))
    page.locator(".bk-tab", has_text="Write").click()
    set_field(page, "new tokens", NEW_TOKENS)
    page.locator(".bk-label", has_text="steer").first.click()  # the checkbox's label
    set_field(page, "steer block", 1)
    set_field(page, "toward", " big dog")
    set_field(page, "away from", " cat")
    set_field(page, "α", 8)
    write(page)
    expect(page.locator(".write-check")).to_contain_text("holds", timeout=60_000)
    expect(page.locator(".write-compare")).to_contain_text("plain")
    assert page.evaluate(STRIP_CELLS) == [visible_token(token) for token in
                                          token_strings(tiny_model, steered.generated_ids.tolist())]
    expect(page.locator(".status-line")).to_contain_text("steered: +8·v at block 1")
    pieces = " ".join(visible_token(piece) for piece in token_strings(tiny_model, encode_prompt(tiny_model, " big dog",
                                                                                                 bos=False)))
    expect(page.locator(".write-several")).to_have_text(f"toward ␣big␣dog is 2 tokens ({pieces}): the vector reads "
                                                        f"the layer_input at its last position, after the whole text.")


def test_bad_write_settings_are_refused_and_the_page_stays_usable(page_with_checks, tiny_model):
    page = page_with_checks
    prompt_ids = encode_prompt(tiny_model, PROMPT, bos=True)
    run_prompt(page, PROMPT, len(prompt_ids))
    page.locator(".bk-tab", has_text="Write").click()
    set_field(page, "new tokens", 500)
    page.get_by_role("button", name="Write").click()
    expect(page.locator(".error-line").first).to_contain_text("new tokens must be 1 to 128",
                                                                           timeout=10_000)
    set_field(page, "new tokens", 2)
    write(page)


def test_branches_part_where_the_backend_s_do_and_an_alternative_continues_the_shown_one(page_with_checks,
                                                                                        tiny_model):
    page = page_with_checks
    prompt_ids = encode_prompt(tiny_model, PROMPT, bos=True)
    settings = WriteSettings(max_new_tokens=NEW_TOKENS, temperature=1.5, top_k=50, top_p=1.0, seed=0)
    branches = [generate_tokens(tiny_model, prompt_ids, replace(settings, seed=seed)) for seed in range(3)]
    parting = parting_step(branches)
    assert parting is not None  # three seeds at temperature 1.5 on a random model
    run_prompt(page, PROMPT, len(prompt_ids))
    page.locator(".bk-tab", has_text="Write").click()
    set_field(page, "new tokens", NEW_TOKENS)
    page.locator(".bk-label", has_text="sample").first.click()
    set_field(page, "temperature", 1.5)
    set_field(page, "branches", 3)
    write(page)
    rows = page.locator(".branch-text")
    expect(rows).to_have_count(3)
    for seed in range(3):
        expect(rows.nth(seed)).to_contain_text(f"seed {seed}:")
        expect(rows.nth(seed).locator("mark")).to_have_text(
            visible_token(token_strings(tiny_model, [int(branches[seed].generated_ids[parting])])[0]))
    expect(page.locator(".branch-parting")).to_contain_text(f"part at written token {parting + 1}")
    assert page.evaluate(STRIP_CELLS) == written_tokens(tiny_model, branches[0])

    step = branches[0].steps[parting]
    alternative = next(int(token) for token in step.top_ids if token != branches[0].generated_ids[parting])
    expected = continue_from(tiny_model, BranchStart(branches[0], parting, alternative), settings)
    word = visible_token(token_strings(tiny_model, [alternative])[0])
    page.locator(".bk-btn", has_text=re.compile(rf"^{re.escape(word)} ")).first.click()
    expect(rows).to_have_count(4, timeout=60_000)
    expect(page.locator(".status-line")).to_contain_text(f"seed 0, step {parting + 1} → {word}", timeout=60_000)
    cells = json.dumps(written_tokens(tiny_model, expected), separators=(",", ":"), ensure_ascii=False)
    page.wait_for_function(f"() => JSON.stringify(({STRIP_CELLS})()) === {json.dumps(cells)}", timeout=30_000)
    assert "branches=3" in page.url and "branched=" in page.url
    page.screenshot(path=ARTIFACTS / "page-branches.png", full_page=True)

    page.get_by_role("button", name="show", exact=True).first.click()  # the first seed's text back in every tab
    expect(page.locator(".status-line")).to_contain_text(f"{NEW_TOKENS} written · seed 0", timeout=60_000)
    student = page.context.new_page()  # the link writes the same branches, the continued one included
    student.goto(page.url)
    student.locator(".bk-tab", has_text="Write").click()
    expect(student.locator(".branch-text")).to_have_count(4, timeout=90_000)
    for index in range(4):
        expect(student.locator(".branch-text").nth(index)).to_have_text(rows.nth(index).inner_text())
    student.close()


def written_tokens(loaded, generation) -> list[str]:
    return [visible_token(token) for token in token_strings(loaded, generation.generated_ids.tolist())]
