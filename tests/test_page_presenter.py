"""Presenter mode on a 1024x768 projector, walked as a teacher would: every tab, then every lesson step, each checked
for text under 20 px (the page's text, shadow roots included, and every Bokeh figure's fonts), a lesson text that
scrolls in its box, a lesson mark out of view, the lesson panel lying over a control, and "\\ufffd"; then a pinned
card, which must be on screen at 1024x768 and 1366x768; normal mode keeps every text at 14 px at least."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from conftest import RUN_SECONDS
from playwright.sync_api import Page, expect
from test_page import ARTIFACTS, PROMPT, n_tokens_of
from test_page_fit import open_presenting
from test_page_lessons import HIGHLIGHT, STEP_FIGURES, STEP_SECONDS, expected_numbers

from page_driving.locators import FIGURES_BY_TAB, NORMS_TAB, PROMPT_BOX
from page_driving.sync_steps import click_part, show_tab, wait_until_settled

PRESENTER_PX = 20
NORMAL_PX = 14
PROJECTOR = {"width": 1024, "height": 768}
WIDE = {"width": 1366, "height": 768}

# Every element of the page, shadow roots included.
ALL_ELEMENTS = """root => {
    const found = [];
    const walk = node => {
        for (const el of node.querySelectorAll("*")) {
            found.push(el);
            if (el.shadowRoot) walk(el.shadowRoot);
        }
    };
    walk(root);
    return found;
}"""

# Whether an element is drawn at all: it has a size and no ancestor hides it (a hidden tab's figures keep theirs).
DRAWN = """el => {
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height || box.bottom < 0 || box.top > innerHeight) return false;
    for (let up = el; up; up = up.parentNode instanceof ShadowRoot ? up.parentNode.host : up.parentNode) {
        if (!(up instanceof Element)) continue;
        const style = getComputedStyle(up);
        if (style.visibility === "hidden" || style.display === "none") return false;
    }
    return true;
}"""

# Whether an element's centre is on screen and not clipped away by a scrolling or hiding ancestor.
SHOWN = """el => {
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height) return false;
    const x = box.left + box.width / 2, y = box.top + box.height / 2;
    if (x < 0 || y < 0 || x >= innerWidth || y >= innerHeight) return false;
    for (let up = el; up; up = up.parentNode instanceof ShadowRoot ? up.parentNode.host : up.parentNode) {
        if (!(up instanceof Element)) continue;
        const style = getComputedStyle(up);
        if (style.visibility === "hidden" || style.display === "none") return false;
        if (up !== el && style.overflow !== "visible") {
            const clip = up.getBoundingClientRect();
            if (x < clip.left || x > clip.right || y < clip.top || y > clip.bottom) return false;
        }
    }
    return true;
}"""

# The visible DOM texts smaller than the least size, with their size.
SMALL_DOM_TEXT = f"""least => {{
    const shown = {SHOWN};
    const small = [];
    for (const el of ({ALL_ELEMENTS})(document)) {{
        const own = [...el.childNodes].filter(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
        if (!own.length || ["SCRIPT", "STYLE", "TITLE"].includes(el.tagName)) continue;
        const size = parseFloat(getComputedStyle(el).fontSize);
        if (size < least && shown(el)) small.push(`${{size}}px: ${{own.map(n => n.textContent.trim()).join(" ")}}`);
    }}
    return [...new Set(small)];
}}"""

# Every font size of every Bokeh figure on screen: title, notes above and below, axis names and tick labels,
# legends, colour bars and text glyphs (the lens cells, the diagram's boxes, the lesson's labels).
SMALL_BOKEH_TEXT = f"""least => {{
    const drawn = {DRAWN};
    const px = size => parseFloat(typeof size === "object" && size !== null ? size.value : size);
    const small = [];
    const check = (figure, what, size) => {{
        if (px(size) < least) small.push(`${{figure}} ${{what}}: ${{px(size)}}px`);
    }};
    for (const view of Bokeh.index.query(v => v.model.type === "Figure" || v.model.type === "Plot")) {{
        if (!view.el.isConnected || !drawn(view.el)) continue;
        const fig = view.model, name = fig.name || fig.title?.text || "figure";
        if (fig.title?.text) check(name, "title", fig.title.text_font_size);
        for (const side of [fig.above, fig.below, fig.left, fig.right]) for (const item of side) {{
            if (item.type === "Title" && item.text) check(name, "note", item.text_font_size);
            if (item.type.endsWith("Axis") && item.visible) {{
                if (item.axis_label) check(name, "axis name", item.axis_label_text_font_size);
                check(name, "tick labels", item.major_label_text_font_size);
            }}
            if (item.type === "ColorBar") {{
                if (item.title) check(name, "colour bar title", item.title_text_font_size);
                check(name, "colour bar labels", item.major_label_text_font_size);
            }}
            if (item.type === "Legend") check(name, "legend", item.label_text_font_size);
        }}
        for (const item of fig.center) {{
            if (item.type === "Legend") check(name, "legend", item.label_text_font_size);
            if (item.type === "Label" && item.visible && item.text) check(name, `label ${{item.name || item.text}}`,
                                                                          item.text_font_size);
        }}
        for (const renderer of fig.renderers) {{
            const glyph = renderer.glyph;
            if (renderer.visible && glyph && glyph.type === "Text" && renderer.data_source.get_length())
                check(name, `text ${{renderer.name || glyph.text.field || ""}}`, glyph.text_font_size);
        }}
    }}
    return small;
}}"""

# Every text on the page and in the figures' sources and tick labels that holds a replacement character.
REPLACEMENT_CHARACTERS = f"""() => {{
    const bad = [];
    for (const el of ({ALL_ELEMENTS})(document))
        for (const node of el.childNodes)
            if (node.nodeType === Node.TEXT_NODE && node.textContent.includes("\\ufffd")) bad.push(node.textContent);
    for (const view of Bokeh.index.query(v => v.model.type === "Figure")) {{
        for (const axis of [...view.model.above, ...view.model.below, ...view.model.left, ...view.model.right]) {{
            const labels = axis.major_label_overrides;
            const texts = labels instanceof Map ? [...labels.values()] : Object.values(labels ?? {{}});
            bad.push(...texts.map(String).filter(text => text.includes("\\ufffd")));
        }}
        for (const renderer of view.model.renderers)
            for (const column of Object.values(renderer.data_source?.data ?? {{}}))
                bad.push(...[...column].filter(v => typeof v === "string" && v.includes("\\ufffd")));
    }}
    return bad;
}}"""

# The visible controls whose centre the lesson panel lies over.
COVERED_CONTROLS = f"""() => {{
    const shown = {SHOWN};
    const deepest = (x, y) => {{
        let hit = document.elementFromPoint(x, y);
        while (hit && hit.shadowRoot) {{
            const inner = hit.shadowRoot.elementFromPoint(x, y);
            if (!inner || inner === hit) break;
            hit = inner;
        }}
        return hit;
    }};
    const inPanel = el => {{
        for (let up = el; up; up = up.parentNode instanceof ShadowRoot ? up.parentNode.host : up.parentNode)
            if (up instanceof Element && up.classList.contains("lesson-area")) return true;
        return false;
    }};
    const controls = ({ALL_ELEMENTS})(document).filter(el =>
        el.matches("input, button, select, textarea, label, .bk-tab, .bk-Canvas") && !inPanel(el) && shown(el));
    return controls.filter(el => {{
        const box = el.getBoundingClientRect();
        return inPanel(deepest(box.left + box.width / 2, box.top + box.height / 2));
    }}).map(el => `${{el.tagName}} ${{(el.textContent || el.placeholder || el.className).trim().slice(0, 40)}}`);
}}"""

# How much the lesson's text is cut off in its box (0: none).
LESSON_OVERFLOW = f"""() => ({ALL_ELEMENTS})(document).filter(el => el.matches(".lesson-text, .lesson-panel"))
    .map(el => el.scrollHeight - el.clientHeight).reduce((a, b) => Math.max(a, b), 0)"""

LESSON_BOTTOM = f"""() => Math.max(...({ALL_ELEMENTS})(document).filter(el => el.matches(".lesson-area"))
    .map(el => el.getBoundingClientRect().bottom))"""

# The step's figure on screen: its canvas's top (where its title is) and bottom, and the column that holds it below
# its controls (the nearest one with something above the figure, in its tab): that column's top and whether each of
# its inputs, selects and sliders above the figure is on screen.
STEP_FIGURE = f"""name => {{
    const shown = {SHOWN};
    const view = Bokeh.index.query_one(v => v.model.name === name);
    const canvas = view.canvas_view.el.getBoundingClientRect();
    let controls = null;
    for (let branch = view, up = view.parent; up && !up.model.type.endsWith("Tabs"); branch = up, up = up.parent) {{
        if (Array.isArray(up.model.children) && up.model.children.indexOf(branch.model) > 0) {{
            const inputs = ({ALL_ELEMENTS})(up.el.shadowRoot ?? up.el).filter(el =>
                el.matches("input, select, .noUi-target")
                && el.getBoundingClientRect().bottom <= canvas.top && el.getBoundingClientRect().width);
            controls = {{top: up.el.getBoundingClientRect().top,
                         shown: inputs.map(el => shown(el) && el.getBoundingClientRect().top >= 0),
                         names: inputs.map(el => el.tagName + " " + (el.value ?? el.className))}};
            break;
        }}
    }}
    return {{top: canvas.top, bottom: canvas.bottom, controls}};
}}"""

# The newest pinned card's box (cards are newest first), and whether the card itself is what shows at a point just
# inside its top (not clipped away by a scrolling box around it, nor under something else).
CARD_BOX = f"""() => {{
    const card = ({ALL_ELEMENTS})(document).find(el => el.matches(".part-card"));
    if (!card) return null;
    const box = card.getBoundingClientRect();
    let hit = document.elementFromPoint(box.left + box.width / 2, box.top + 40);
    while (hit && hit.shadowRoot) {{
        const inner = hit.shadowRoot.elementFromPoint(box.left + box.width / 2, box.top + 40);
        if (!inner || inner === hit) break;
        hit = inner;
    }}
    let shown = false;
    for (let up = hit; up; up = up.parentNode instanceof ShadowRoot ? up.parentNode.host : up.parentNode)
        if (up === card) shown = true;
    return {{top: box.top, bottom: box.bottom, left: box.left, right: box.right, shown}};
}}"""

OPEN_BLOCK_TOP = """part => {
    const view = Bokeh.index.query_one(v => v.model.name === "block_diagram");
    const source = view.model.renderers.map(r => r.data_source).find(s => s.name === "block_diagram_parts");
    const i = source.data.part.indexOf(part);
    return view.canvas_view.el.getBoundingClientRect().top + view.frame.y_scale.compute(source.data.y[i]);
}"""


def unreadable(page: Page, where: str) -> list[str]:
    """Everything on screen that a back row could not read: small text in the page or the figures, a "\\ufffd"."""
    page.mouse.move(1, PROJECTOR["height"] - 1)  # no tooltip
    problems = [f"{where}: {text}" for text in page.evaluate(SMALL_DOM_TEXT, PRESENTER_PX)]
    problems += [f"{where}: {text}" for text in page.evaluate(SMALL_BOKEH_TEXT, PRESENTER_PX)]
    problems += [f"{where}: \\ufffd in {text!r}" for text in page.evaluate(REPLACEMENT_CHARACTERS)]
    return problems


@pytest.fixture
def presenter_page(browser, served_app, tiny_model):
    """A 1024x768 page in presenter mode after a run of the test prompt; fails on a browser console error."""
    page = browser.new_page(viewport=PROJECTOR)
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    open_presenting(page, served_app.url, PROMPT, n_tokens_of(tiny_model, PROMPT))
    yield page
    wait_until_settled(page)
    page.close()
    assert not errors, errors


def test_every_tab_is_readable_from_the_back_row(presenter_page, tiny_model):
    page = presenter_page
    expect(page.locator("#sidebar")).to_be_hidden()
    assert page.locator("#header").bounding_box()["height"] <= 60
    n_tokens = n_tokens_of(tiny_model, PROMPT)
    problems = []
    ARTIFACTS.mkdir(exist_ok=True)
    for tab in FIGURES_BY_TAB:
        show_tab(page, tab, n_tokens)
        wait_until_settled(page)
        page.screenshot(path=ARTIFACTS / f"presenter-read-{tab.lower().replace(' ', '-').replace('&', 'and')}.png")
        problems += unreadable(page, tab)
        main = page.locator("#main").bounding_box()
        assert main["width"] >= PROJECTOR["width"] - 40, (tab, main)
    assert not problems, "\n".join(problems)
    page.locator("#sidebar-toggle").click()  # the controls are one click away, as large as the rest
    expect(page.locator(PROMPT_BOX)).to_be_visible()
    page.wait_for_timeout(500)
    assert not (small := page.evaluate(SMALL_DOM_TEXT, PRESENTER_PX)), small


def test_the_compare_with_selector_sits_beside_the_norms_checkboxes_with_its_label_beside_its_box(presenter_page,
                                                                                                  tiny_model):
    """On a projector's first screen every line above the norms heatmap costs its rows: the selector takes none of
    its own, and its label none above it."""
    page = presenter_page
    show_tab(page, NORMS_TAB, n_tokens_of(tiny_model, PROMPT))
    wait_until_settled(page)
    checkbox = page.get_by_text("log scale").bounding_box()
    label = page.get_by_text("compare with", exact=True).bounding_box()
    box = page.locator("select:has(option[value='nothing'])").bounding_box()
    middle = checkbox["y"] + checkbox["height"] / 2
    assert box["y"] <= middle <= box["y"] + box["height"], (checkbox, box)
    assert label["x"] + label["width"] <= box["x"] and label["y"] <= middle <= label["y"] + label["height"], (label,
                                                                                                             box)
    assert box["x"] + box["width"] <= PROJECTOR["width"], box


def test_every_lesson_step_fits_one_screen_and_covers_nothing(presenter_page, tiny_model):
    """Each step once drawn; a step whose figure has a mark on this model (the random GPT-2 decides no written word
    before its readout, so lesson 8 marks nothing) has the mark below the panel."""
    page = presenter_page
    expected = expected_numbers(tiny_model)
    page.get_by_role("button", name="▶ Lessons").click()
    problems = []
    for step in range(1, len(STEP_FIGURES) + 1):
        if step > 1:
            page.get_by_role("button", name="Next ▶").click()
        expect(page.locator(".lesson-title")).to_contain_text(f"Lesson {step} of {len(STEP_FIGURES)}",
                                                              timeout=STEP_SECONDS)
        if expected["marks"][step]:
            page.wait_for_function(f"() => ({HIGHLIGHT})({STEP_FIGURES[step - 1]!r})?.at.length > 0",
                                   timeout=STEP_SECONDS)
        else:  # nothing to mark: the step is drawn once its text shows the numbers of the text it wrote
            for number in expected[step]:
                expect(page.locator(f".lesson-text[data-step='{step}']")).to_contain_text(number,
                                                                                          timeout=STEP_SECONDS)
        wait_until_settled(page)
        page.wait_for_timeout(1000)  # the page scrolls to the mark once the figure is drawn
        page.screenshot(path=ARTIFACTS / f"presenter-lesson-{step}.png")
        problems += unreadable(page, f"lesson {step}")
        if overflow := page.evaluate(LESSON_OVERFLOW):
            problems.append(f"lesson {step}: its text scrolls ({overflow} px hidden)")
        problems += [f"lesson {step}: the panel covers {control}" for control in page.evaluate(COVERED_CONTROLS)]
        if not expected["marks"][step]:
            continue
        mark = page.evaluate(HIGHLIGHT, STEP_FIGURES[step - 1])["mark"]
        lesson_bottom = page.evaluate(LESSON_BOTTOM)
        if not lesson_bottom <= mark["y"] <= PROJECTOR["height"]:
            problems.append(f"lesson {step}: its mark is off screen at {mark}")
        problems += [f"lesson {step}: {problem}" for problem in
                     hidden_parts(page.evaluate(STEP_FIGURE, STEP_FIGURES[step - 1]), mark, lesson_bottom)]
    assert not problems, "\n".join(problems)


def hidden_parts(figure: dict, mark: dict, lesson_bottom: float) -> list[str]:
    """What a step leaves hidden below the lesson although it fits with the mark: the controls above the figure,
    where they and the whole figure fit together; else the figure's title, where it fits with the mark."""
    room = PROJECTOR["height"] - lesson_bottom
    controls = figure["controls"]
    if controls is not None and figure["bottom"] - controls["top"] <= room:
        shown = controls["top"] >= lesson_bottom - 1 and figure["bottom"] <= PROJECTOR["height"] + 1
        return [] if shown and all(controls["shown"]) else [
            f"its controls and figure fit on screen together but are not all shown: {figure}"]
    if mark["y"] - figure["top"] <= room - 40 and figure["top"] < lesson_bottom - 1:
        return [f"the figure's title is scrolled off, under the lesson, although it fits with the mark: {figure}"]
    return []


@pytest.mark.parametrize("viewport", [PROJECTOR, WIDE], ids=["1024", "1366"])
@pytest.mark.parametrize("presenter", [False, True], ids=["plain", "presenter"])
def test_a_pinned_card_is_on_screen_beside_its_open_block(browser, served_app, viewport, presenter):
    page = browser.new_page(viewport=viewport)
    page.goto(f"{served_app.url}?presenter={str(presenter).lower()}")
    expect(page.locator(".status-line")).to_contain_text("tokens", timeout=RUN_SECONDS)
    wait_until_settled(page)
    show_tab(page, "Block diagram")
    click_part(page, "block.1")
    expect(page.locator(".part-card").first).to_contain_text("layers.1.layer_output")
    page.wait_for_timeout(1500)  # the page brings the card into view
    card = page.evaluate(CARD_BOX)
    page.screenshot(path=ARTIFACTS / f"pinned-card-{viewport['width']}{'-presenter' * presenter}.png")
    assert card["shown"] and 0 <= card["top"] and card["top"] + 150 <= viewport["height"], card
    assert card["right"] <= viewport["width"], card
    assert 0 <= page.evaluate(OPEN_BLOCK_TOP, "block.1") <= viewport["height"]
    wait_until_settled(page)
    page.close()


@pytest.mark.parametrize("viewport", [PROJECTOR, WIDE], ids=["1024", "1366"])
def test_normal_mode_keeps_every_text_at_14_px(browser, served_app, tiny_model, viewport):
    page = browser.new_page(viewport=viewport)
    page.goto(f"{served_app.url}?prompt={quote(PROMPT)}")
    n_tokens = n_tokens_of(tiny_model, PROMPT)
    expect(page.locator(".status-line")).to_contain_text(f" {n_tokens} tokens ", timeout=RUN_SECONDS)
    problems = []
    for tab in FIGURES_BY_TAB:
        show_tab(page, tab, n_tokens)
        wait_until_settled(page)
        page.mouse.move(1, viewport["height"] - 1)
        problems += [f"{tab}: {text}" for text in page.evaluate(SMALL_DOM_TEXT, NORMAL_PX)]
        problems += [f"{tab}: {text}" for text in page.evaluate(SMALL_BOKEH_TEXT, NORMAL_PX)]
    page.close()
    assert not problems, "\n".join(problems)
