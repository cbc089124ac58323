"""One target, shown as a token, controls that do what they say, and tokens readable in any script, in a real
browser on the tiny GPT-2 (GPT-2's real tokenizer): a typed "London" is followed as " London" with its probability
on the lens, the attribution and the intervention alike; the BOS switch runs again at once and its label text
toggles it; a Japanese, emoji and Cyrillic prompt shows no U+FFFD anywhere on the page."""

from __future__ import annotations

import math
import re

from conftest import RUN_SECONDS
from playwright.sync_api import Page, expect

from layouts.target_box import probability_text
from model_backend import capture_run, direct_logit_attribution
from model_backend.targets import match_target
from model_backend.tokens import visible_token
from page_driving.locators import TARGET_BOX
from page_driving.sync_steps import run_prompt, show_tab, wait_until_settled
from test_page import ARTIFACTS, INJECTED_IMAGES
from test_page_attribution import shown_sum_and_logit

FRANCE = "The capital of France is"
SCRIPTS_PROMPT = "東京は日本の首都です 🙂 Привет"

SHOWN_TEXTS = """() => {
    // Every text the page shows: the DOM (through shadow roots) and the Bokeh figures' titles, axis labels and
    // data (cells, hover tooltips) of the tab on screen.
    const texts = [];
    const walk = root => {
        root.querySelectorAll("*").forEach(el => {
            if (el.shadowRoot) walk(el.shadowRoot);
            if (el.value && typeof el.value === "string") texts.push(el.value);
        });
        texts.push(root.textContent || "");
        root.querySelectorAll && root.querySelectorAll("option").forEach(o => texts.push(o.textContent));
    };
    walk(document);
    for (const view of Bokeh.index.query(() => true)) {
        const model = view.model;
        if (model.title && model.title.text) texts.push(model.title.text);
        const sides = [model.below, model.left].filter(side => Array.isArray(side));
        for (const axis of sides.flat()) {
            const labels = axis.major_label_overrides;
            if (labels)
                texts.push(...(labels instanceof Map ? [...labels.values()] : Object.values(labels)).map(String));
        }
        for (const renderer of Array.isArray(model.renderers) ? model.renderers : []) {
            const data = renderer.data_source && renderer.data_source.data;
            if (!data) continue;
            for (const column of (data instanceof Map ? data.values() : Object.values(data))) {
                for (const value of column) if (typeof value === "string") texts.push(value);
            }
        }
    }
    return texts;
}"""


def visible(page: Page, selector: str):
    return page.locator(selector).locator("visible=true")


def type_target(page: Page, text: str) -> None:
    box = visible(page, TARGET_BOX)
    box.fill(text)
    box.press("Enter")


def test_a_typed_word_is_followed_as_its_spaced_token_in_every_tab(page_with_checks, tiny_model):
    page = page_with_checks
    run = capture_run(tiny_model, FRANCE, bos=True)
    match = match_target(tiny_model, run, "London")
    assert match.followed.token_ids == (3576,) and match.followed.labels == (" London",)
    followed = f"␣London (token 3576) · p = {probability_text(match.followed.probability)} after ␣is"
    run_prompt(page, FRANCE, run.seq_len)

    show_tab(page, "Logit lens", run.seq_len)
    type_target(page, "London")
    expect(visible(page, ".target-note").first).to_contain_text(f"Following {followed} · typed “London”, with the "
                                                                "space a word has here.")
    expect(visible(page, ".other-spelling").first).to_contain_text("London · token 23421")  # the other spelling
    page.wait_for_function("""() => {
        const view = Bokeh.index.query_one(v => v.model.name === "lens_target");
        return view && view.model.title.text.startsWith("p(␣London)") && view.has_finished();
    }""")
    assert math.isclose(lens_target_title_and_last_p(page)[1], match.followed.probability, rel_tol=1e-3)
    page.screenshot(path=ARTIFACTS / "page-target-lens.png")

    assert_attribution_and_intervention_follow(page, tiny_model, run, followed, "␣London", 3576,
                                               match.followed.probability)
    expect(page).to_have_url(re.compile(r"[?&]target=London(&|$)"))

    type_target(page, "Londonderry")
    expect(visible(page, ".target-note").first).to_contain_text("“Londonderry” is not one token")
    expect(visible(page, ".target-note").first).to_contain_text(f"the views still follow {followed}")
    type_target(page, "<img src=x onerror=alert(1)>")
    expect(visible(page, ".target-note").first).to_contain_text("“<img src=x onerror=alert(1)>” is not one token")
    assert page.evaluate(INJECTED_IMAGES) == 0
    page.screenshot(path=ARTIFACTS / "page-target-refused.png")


def lens_target_title_and_last_p(page: Page) -> tuple[str, float]:
    """The lens's target plot: its title, and the target's probability at the last row (the model's output)."""
    return page.evaluate("""() => {
        const view = Bokeh.index.query_one(v => v.model.name === "lens_target");
        const data = view.model.renderers.map(r => r.data_source).find(s => s.name === "lens_target_probs").data;
        return [view.model.title.text, data.x[data.x.length - 1]];
    }""")


def assert_attribution_and_intervention_follow(page: Page, tiny_model, run, followed: str, label: str,
                                               token_id: int, probability: float) -> None:
    """The attribution and the intervention tabs say they follow the token, and show its logit (as the backend
    attributes it) and its clean log-probability."""
    show_tab(page, "Logit attribution", run.seq_len)
    expect(visible(page, ".target-note").first).to_contain_text(f"Following {followed}")
    expect(page.locator(".attribution-about")).to_contain_text(f"Logit of {label} (token {token_id}")
    _, logit = shown_sum_and_logit(page)
    assert abs(logit - direct_logit_attribution(tiny_model, run, token_id).logit) <= 1e-5

    show_tab(page, "Intervention", run.seq_len)
    expect(visible(page, ".target-note").first).to_contain_text(f"Following {followed}")
    expect(page.locator("body")).to_contain_text(f"Clean run: log p = {math.log(probability):.3f}")
    assert page.evaluate("""() => Bokeh.index.query_one(v => v.model.name === "intervention")
                                  .model.title.text""").startswith(f"log p({label}) next")


def test_a_clicked_other_spelling_is_followed_in_every_tab(page_with_checks, tiny_model):
    """Typed "London" is " London" after the prompt; its other spelling "London" (23421), clicked, is followed as
    written by the lens, the attribution and the intervention, offers " London" back, and is kept in the link."""
    page = page_with_checks
    run = capture_run(tiny_model, FRANCE, bos=True)
    chosen = match_target(tiny_model, run, "London", as_written=True).followed
    assert chosen.token_ids == (23421,) and chosen.labels == ("London",)
    followed = f"London (token 23421) · p = {probability_text(chosen.probability)} after ␣is"
    run_prompt(page, FRANCE, run.seq_len)
    show_tab(page, "Logit lens", run.seq_len)
    type_target(page, "London")
    expect(visible(page, ".target-note").first).to_contain_text("Following ␣London (token 3576)")
    visible(page, ".other-spelling").filter(has_text="London · token 23421").click()
    expect(visible(page, ".target-note").first).to_contain_text(f"Following {followed} · typed “London”, as written.")
    expect(visible(page, ".other-spelling").first).to_contain_text("␣London · token 3576")  # the way back
    page.wait_for_function("""() => {
        const view = Bokeh.index.query_one(v => v.model.name === "lens_target");
        return view && view.model.title.text.startsWith("p(London)") && view.has_finished();
    }""", timeout=2 * RUN_SECONDS)
    assert math.isclose(lens_target_title_and_last_p(page)[1], chosen.probability, rel_tol=1e-3)
    page.screenshot(path=ARTIFACTS / "page-target-other-spelling.png")

    assert_attribution_and_intervention_follow(page, tiny_model, run, followed, "London", 23421, chosen.probability)
    expect(page).to_have_url(re.compile(r"[?&]target=London&target_as_written=London(&|$)"))
    page.goto(page.url)  # the link follows the same token
    show_tab(page, "Intervention", run.seq_len)
    expect(visible(page, ".target-note").first).to_contain_text(f"Following {followed} · typed “London”, as written.")
    type_target(page, "Paris")  # another word typed: matched as a word again, with its space
    expect(visible(page, ".target-note").first).to_contain_text("Following ␣Paris (token 6342)")
    expect(page).not_to_have_url(re.compile("target_as_written"))


def status_tokens(page: Page, n_tokens: int) -> None:
    expect(page.locator(".status-line")).to_contain_text(f" {n_tokens} tokens ", timeout=RUN_SECONDS)


def test_the_bos_switch_runs_again_at_once_and_every_checkbox_label_toggles_its_box(page_with_checks, tiny_model):
    page = page_with_checks
    n_tokens = capture_run(tiny_model, FRANCE, bos=True).seq_len
    run_prompt(page, FRANCE, n_tokens)
    wait_until_settled(page)
    bos = page.locator(".bk-Checkbox").filter(has_text="prepend the BOS token")
    bos.get_by_text("prepend the BOS token").click()
    expect(bos.locator("input")).not_to_be_checked()
    status_tokens(page, n_tokens - 1)  # no Run pressed
    expect(page).to_have_url(re.compile(r"[?&]bos=false"))
    wait_until_settled(page)
    bos.get_by_text("prepend the BOS token").click()
    expect(bos.locator("input")).to_be_checked()
    status_tokens(page, n_tokens)
    wait_until_settled(page)

    for tab, label in (("Logit lens", "raw"), ("Logit attribution", "one bar per attention head")):
        show_tab(page, tab)
        box = visible(page, ".bk-Checkbox").filter(has_text=label)
        before = box.locator("input").is_checked()
        box.get_by_text(label).click()
        expect(box.locator("input")).to_be_checked(checked=not before)
        wait_until_settled(page)


def test_a_prompt_in_any_script_shows_no_replacement_character(page_with_checks, tiny_model):
    page = page_with_checks
    run = capture_run(tiny_model, SCRIPTS_PROMPT, bos=True)
    assert any("\ufffd" in tiny_model.tokenizer.decode([i]) for i in run.token_ids)  # the trap is real here
    run_prompt(page, SCRIPTS_PROMPT, run.seq_len)
    wait_until_settled(page)
    for tab in ("Block diagram", "Norms & sinks", "Cosine similarity", "Logit lens", "Logit attribution",
                "Attention", "Intervention"):
        show_tab(page, tab, run.seq_len)
        wait_until_settled(page)
        shown = "\n".join(page.evaluate(SHOWN_TEXTS))
        assert "\ufffd" not in shown, (tab, [line for line in shown.splitlines() if "\ufffd" in line][:5])
        if tab == "Norms & sinks":  # each piece of a split character is named with its bytes and the character
            pieces = [visible_token(token) for token in run.tokens if "⟨" in token]
            assert len(pieces) >= 10 and all(piece in shown for piece in pieces) and "␣🙂" in shown
    page.screenshot(path=ARTIFACTS / "page-any-script.png")
