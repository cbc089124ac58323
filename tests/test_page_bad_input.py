"""Bad input in the served page: 20 random Unicode prompts each show their run or a clear message, and one page's
refused prompts leave another page's run untouched; no traceback, no console error, no injected element."""

from __future__ import annotations

import json
import re
import random

from playwright.sync_api import Page, expect
from test_fuzz_prompts import CODE_POINTS, expected_refusal, random_character, random_prompt
from conftest import RUN_SECONDS
from test_page import ARTIFACTS, INJECTED_IMAGES, n_tokens_of

from page_driving.locators import PROMPT_BOX
from page_driving.sync_steps import run_prompt, wait_until_settled

SEED = 11
N_PROMPTS = 20
INJECTION = "<img src=x onerror=alert(1)>"


def thousand_code_points(rng: random.Random) -> str:
    """1,000 code points of every kind: controls, RTL marks, emoji, lone surrogates and the rest."""
    return "".join(random_character(rng, rng.choice(list(CODE_POINTS))) for _ in range(1000))


def as_held(prompt: str) -> str:
    """The prompt as the box holds it: in UTF-16, where two adjacent surrogates that pair up are one character, and
    in an <input>, which drops line breaks."""
    utf16 = prompt.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return utf16.replace("\r", "").replace("\n", "")


def outcome(tiny_model, prompt: str) -> str:
    """What the page must show for a prompt put in the box: the refusal's words, or the token count of the run."""
    held = as_held(prompt)
    return expected_refusal(tiny_model, held, bos=True) or f" {n_tokens_of(tiny_model, held)} tokens "


def page_cases(tiny_model) -> list[tuple[str, str]]:
    """Random prompts with their outcomes (one of 1,000 code points, one of only whitespace, some carrying an HTML
    payload), where no two in a row end alike, so each outcome is seen as its own."""
    rng = random.Random(SEED)
    cases = [(prompt, outcome(tiny_model, prompt)) for prompt in (thousand_code_points(rng), " \t\u3000\u2003")]
    while len(cases) < N_PROMPTS:
        prompt = random_prompt(rng)
        prompt = INJECTION + prompt if rng.random() < 0.3 else prompt
        expected = outcome(tiny_model, prompt)
        if expected != cases[-1][1]:
            cases.append((prompt, expected))
    return cases


def paste(page: Page, prompt: str) -> str:
    """Put the prompt in the box as a script pastes it, so lone surrogates survive (Playwright's fill and the URL
    turn them into U+FFFD), press Enter, and return the text the box holds (an <input> drops line breaks)."""
    box = page.locator(PROMPT_BOX)
    held = box.evaluate(f"""box => {{
        box.value = {json.dumps(prompt)};
        box.dispatchEvent(new Event("input"));
        box.dispatchEvent(new Event("change"));
        return JSON.stringify(box.value);
    }}""")
    box.press("Enter")
    return json.loads(held)


def expect_outcome(page: Page, expected: str) -> None:
    if expected.endswith(" tokens "):
        expect(page.locator(".status-line")).to_contain_text(expected, timeout=RUN_SECONDS)
        expect(page.locator(".error-line")).to_have_count(0)
    else:
        expect(page.locator(".error-line")).to_contain_text(expected, timeout=RUN_SECONDS)
    wait_until_settled(page)


def test_random_unicode_prompts_show_their_run_or_a_message(page_with_checks, tiny_model, served_app):
    page = page_with_checks
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    cases = page_cases(tiny_model)
    for prompt, expected in cases:
        held = paste(page, prompt)
        assert held == as_held(prompt)
        expect_outcome(page, expected)
    outcomes = [expected for _, expected in cases]
    n_runs = sum(o.endswith(" tokens ") for o in outcomes)
    assert "U+D" in outcomes[0] and "whitespace" in outcomes[1] and n_runs >= 8, outcomes
    assert page.evaluate(INJECTED_IMAGES) == 0
    assert not dialogs
    assert "Traceback" not in served_app.log_without_closed_tab_reports()


def test_a_prompt_from_the_url_with_surrogate_bytes_runs_as_replacement_characters(page: Page, served_app):
    """A URL cannot carry a lone surrogate: its UTF-8 bytes (ED A0 80) arrive as three U+FFFD, which run."""
    page.goto(f"{served_app.url}?prompt=ok%ED%A0%80")
    expect(page.locator(".status-line")).to_contain_text(" tokens ", timeout=RUN_SECONDS)
    wait_until_settled(page)
    expect(page.locator(PROMPT_BOX)).to_have_value("ok\ufffd\ufffd\ufffd")
    expect(page.locator(".error-line")).to_have_count(0)


def test_refused_prompts_stay_on_their_own_page(page_with_checks, browser, tiny_model, served_app):
    page = page_with_checks
    other = browser.new_page(viewport={"width": 1366, "height": 768})
    other_errors = []
    other.on("console", lambda message: message.type == "error" and other_errors.append(message.text))
    other.goto(served_app.url)
    expect(other.locator(".status-line")).to_contain_text("tokens", timeout=RUN_SECONDS)
    wait_until_settled(other)

    page.locator(PROMPT_BOX).fill("a." * 2500)  # 5,000 tokens in the box's 5,000 characters at most
    page.locator(PROMPT_BOX).press("Enter")
    run_prompt(other, "Meanwhile, another student runs", n_tokens_of(tiny_model, "Meanwhile, another student runs"))
    expect(page.locator(".error-line")).to_contain_text("the prompt is 5001 tokens long")
    expect(page.locator(".error-line")).to_contain_text("reads at most 64 positions: shorten it")
    wait_until_settled(page)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "page-bad-input.png")

    page.locator(PROMPT_BOX).fill("")
    page.locator(PROMPT_BOX).press("Enter")
    run_prompt(other, "and goes on", n_tokens_of(tiny_model, "and goes on"))
    expect(page.locator(".error-line")).to_contain_text("the prompt is empty")
    expect(page).to_have_url(re.compile(r"[?&]prompt=The\+capital\+of\+"))  # the link keeps the prompt that ran
    wait_until_settled(other)
    expect(other.locator(".error-line")).to_have_count(0)
    other.close()
    assert not other_errors, other_errors
    assert "Traceback" not in served_app.log_without_closed_tab_reports()


def test_a_link_with_a_value_panel_would_parse_as_a_number_opens_with_a_note(page: Page, served_app):
    """``layer=²`` passes ``isdigit`` and fails ``int``: Panel's own Location would fail the page's script on it
    (``viz_app/panel_internals.py``); the page's own opens, runs, and says the value was not used."""
    page.goto(f"{served_app.url}?layer=%C2%B2&prompt=%C2%B2")
    expect(page.locator(".status-line")).to_contain_text(" tokens ", timeout=RUN_SECONDS)
    wait_until_settled(page)
    expect(page.locator(PROMPT_BOX)).to_have_value("²")
    expect(page.get_by_text("the link's block is '²'")).to_be_visible()
    assert "layer=0" in page.url and "Traceback" not in served_app.log_without_closed_tab_reports()
