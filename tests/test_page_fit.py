"""The page on a 1024x768 projector: no sideways scroll on any tab, every tab reachable, a sidebar that collapses,
the next-token panel, presenter mode from the URL, and refused input that says so instead of failing silently."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from conftest import RUN_SECONDS
from playwright.sync_api import Page, expect
from test_page import ARTIFACTS, PROMPT, n_tokens_of

from model_backend import capture_run
from model_backend.tokens import top_next_tokens, visible_token
from page_driving.locators import FIGURES_BY_TAB, FIND_VIEW, PROMPT_BOX
from page_driving.sync_steps import run_prompt, show_tab, wait_until_settled

SMALL = {"width": 1024, "height": 768}
SIDEWAYS_SCROLL = "() => document.documentElement.scrollWidth - window.innerWidth"


@pytest.fixture
def small_page(browser, served_app):
    """A 1024x768 page after its first run; fails the test on a browser console error."""
    page = browser.new_page(viewport=SMALL)
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    wait_until_settled(page)
    page.close()
    assert not errors, errors


def open_page(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.locator(".status-line")).to_contain_text("tokens", timeout=RUN_SECONDS)
    wait_until_settled(page)


def open_presenting(page: Page, url: str, prompt: str, n_tokens: int) -> None:
    """Open the page in presenter mode on ``prompt`` from the link (the sidebar with the prompt box starts folded)."""
    page.goto(f"{url}?presenter=true&prompt={quote(prompt)}")
    expect(page.locator(".status-line")).to_contain_text(f" {n_tokens} tokens ", timeout=RUN_SECONDS)
    wait_until_settled(page)


def test_every_tab_fits_1024_by_768_without_sideways_scroll(small_page, served_app, tiny_model):
    page = small_page
    open_page(page, served_app.url)
    n_tokens = n_tokens_of(tiny_model, PROMPT)
    run_prompt(page, PROMPT, n_tokens)
    ARTIFACTS.mkdir(exist_ok=True)
    for tab in FIGURES_BY_TAB:
        header = page.locator(".bk-tab", has_text=tab)
        box = header.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= SMALL["width"], (tab, box)
        show_tab(page, tab, n_tokens)
        assert page.evaluate(SIDEWAYS_SCROLL) <= 0, tab
        page.screenshot(path=ARTIFACTS / f"fit-{tab.lower().replace(' ', '-').replace('&', 'and')}.png")


def test_the_sidebar_collapses_and_the_main_area_widens(small_page, served_app):
    page = small_page
    open_page(page, served_app.url)
    width = page.locator("#main").bounding_box()["width"]
    page.locator("#sidebar-toggle").click()
    expect(page.locator("#sidebar")).to_be_hidden()
    page.wait_for_function(f"() => document.querySelector('#main').getBoundingClientRect().width > {width + 200}",
                           timeout=RUN_SECONDS)


def test_the_next_token_panel_shows_the_models_top_five(small_page, served_app, tiny_model):
    page = small_page
    open_page(page, served_app.url)
    run_prompt(page, PROMPT, n_tokens_of(tiny_model, PROMPT))
    expected = top_next_tokens(tiny_model, capture_run(tiny_model, PROMPT, bos=True))
    panel = page.locator(".next-tokens")
    for token, probability in expected:
        expect(panel).to_contain_text(f"{visible_token(token)} {probability:.0%}")
    show_tab(page, "Attention")
    expect(panel).to_be_visible()


def test_presenter_mode_from_the_url_enlarges_the_figures(small_page, served_app):
    page = small_page
    open_page(page, f"{served_app.url}?presenter=true")
    expect(page.locator("#sidebar input[type=checkbox]").last).to_be_checked()
    show_tab(page, "Norms & sinks")
    page.wait_for_function(f"() => ({FIND_VIEW})('norms_heatmap')?.model.title.text_font_size === '24px'",
                           timeout=RUN_SECONDS)
    page.goto(f"{served_app.url}?presenter=maybe")
    expect(page.locator(".url-note")).to_contain_text("the link's presenter is 'maybe', not true or false")


def test_a_refused_prompt_marks_the_views_and_download_as_the_previous_run(small_page, served_app, tiny_model):
    page = small_page
    open_page(page, served_app.url)
    kept = n_tokens_of(tiny_model, "Kept run")
    run_prompt(page, "Kept run", kept)
    page.get_by_role("button", name="Prepare the run's NPZ").click()
    expect(page.locator(".npz-link")).to_contain_text("Save tiny-gpt2")
    expect(page.locator(".npz-link a")).to_have_attribute("download", "tiny-gpt20-Kept-run.npz")
    page.locator(PROMPT_BOX).fill("")
    page.locator(PROMPT_BOX).press("Enter")
    expect(page.locator(".error-line")).to_contain_text("empty")
    expect(page.locator(".stale-run")).to_contain_text(f"Showing the previous run (“Kept run”, {kept} tokens)")
    expect(page.locator(".npz-link")).to_contain_text("(the previous run)")
    run_prompt(page, "Back again", n_tokens_of(tiny_model, "Back again"))
    expect(page.locator(".stale-run")).to_have_count(0)


def test_a_block_past_the_last_is_refused_with_a_message(small_page, served_app):
    page = small_page
    open_page(page, served_app.url)
    block = page.locator("#sidebar").get_by_role("textbox", name="block")
    block.fill("99")
    block.press("Enter")
    expect(page.locator(".error-line")).to_contain_text("There is no block 99: this model has 3 blocks, 0 to 2")
    expect(block).to_have_value("2")
