"""A visitor's steps on the served page, written once in Playwright's async API (``sync_steps`` makes the same
steps for its sync API): type a prompt and run it, open a tab, pin a part of the diagram, and wait until the status
line and every figure of the shown tab are updated for that run.

Detection reads only what survives in-place updates: a figure's title names the run's token count ("· 32 tokens"),
BokehJS reports the figure's view has finished rendering, and the status line reads " 32 tokens ". A run is timed by
the page itself, from the click's event to the animation frame that finds the figures drawn; it watches the Bokeh
document's changes instead of polling, so the measuring costs the two cores nothing while the model runs.

A step is plain ``await``s of Playwright calls (no other asyncio), so that ``sync_steps`` can read it as sync code.
"""

from __future__ import annotations

import time

from playwright.async_api import Page, expect

from page_driving.locators import FIGURES_BY_TAB, FIND_VIEW, PROMPT_BOX, STILL_FILLING

TIMEOUT_MS = 300_000
POLL_MS = 50
SETTLE_MS = 500
DOUBLE_TAP_MS = 350  # Bokeh reads two taps on one plot within 300 ms as a double tap, which the tap tool ignores

DRAWN = f"""([names, titled, countPattern, filling]) => {{
    if (!window.Bokeh?.index) return false;
    const find = {FIND_VIEW};
    const counted = new RegExp(countPattern);
    const complete = title => counted.test(title) && !filling.some(words => title.includes(words));
    return titled.every(name => complete(find(name)?.model.title?.text ?? ""))
        && names.every(name => find(name)?.has_finished());
}}"""


RUN_DRAWN = f"""([names, countPattern, timeout]) => {{
    const find = {FIND_VIEW};
    const counted = new RegExp(countPattern);
    const titled = () => names.every(name => counted.test(find(name)?.model.title?.text ?? ""));
    const drawn = () => names.every(name => find(name)?.has_finished());
    const doc = Bokeh.documents[0];
    window.runDrawn = new Promise((resolve, reject) => {{
        let clicked = null;
        setTimeout(() => reject(new Error(`the run was not drawn within ${{timeout}} ms`)), timeout);
        document.addEventListener("click", () => {{ clicked ??= performance.now(); }}, {{capture: true, once: true}});
        const frame = () => drawn() ? resolve(performance.now() - clicked) : requestAnimationFrame(frame);
        const changed = () => {{
            if (clicked === null || !titled()) return;
            doc.remove_on_change(changed);
            requestAnimationFrame(frame);
        }};
        doc.on_change(changed);
    }});
}}"""

WATCH_STATUS = """line => {
    window.statusChanged = false;
    new MutationObserver(() => { window.statusChanged = true; })
        .observe(line.getRootNode(), {childList: true, subtree: true, characterData: true});
}"""

DIAGRAM_READY = """([part, pinned]) => {
    const views = [...Bokeh.index.query(v => v.model.name === "block_diagram")];
    if (views.length !== 1 || !views[0].has_finished()) return false;
    const data = views[0].model.renderers.map(r => r.data_source).find(s => s.name === "block_diagram_parts").data;
    return data.part.includes(part) && pinned.every(id => data.edge[data.part.indexOf(id)] > 3);
}"""

PART_CENTER = """part => {
    const view = Bokeh.index.query_one(v => v.model.name === "block_diagram");
    const source = view.model.renderers.map(r => r.data_source).find(s => s.name === "block_diagram_parts");
    const i = source.data.part.indexOf(part);
    const canvas = view.canvas_view.el.getBoundingClientRect();
    return {x: canvas.left + view.frame.x_scale.compute(source.data.x[i]),
            y: canvas.top + view.frame.y_scale.compute(source.data.y[i])};
}"""


async def wait_until_idle(page: Page) -> None:
    """Wait until the status line shows no work in progress (busy messages end with an ellipsis)."""
    await expect(page.locator(".status-line")).not_to_contain_text("…", timeout=TIMEOUT_MS)


async def wait_until_settled(page: Page) -> None:
    """Wait until the page is idle, then a moment for its last messages: before a screenshot, or before closing it
    (a page closed while the server still sends to it logs a Tornado traceback)."""
    await wait_until_idle(page)
    await page.wait_for_timeout(SETTLE_MS)


async def wait_drawn(page: Page, tab: str, n_tokens: int | None = None, *, whole: bool = True) -> None:
    """Wait until every figure of ``tab`` has finished rendering and, when given, names ``n_tokens`` in its title;
    ``whole``: with every row (a view that streams its rows, such as the patching grids, says "so far" or "not
    patched yet" in its titles until it has them all)."""
    names = list(FIGURES_BY_TAB[tab])
    titled = [name for name in names if n_tokens is not None and name != "block_diagram"]
    filling = list(STILL_FILLING) if whole else []
    await page.wait_for_function(DRAWN, arg=[names, titled, rf"(^|\D){n_tokens} tokens", filling],
                                 timeout=TIMEOUT_MS, polling=POLL_MS)


async def show_tab(page: Page, tab: str, n_tokens: int | None = None, *, whole: bool = True) -> float:
    """Open a tab (only the open tab is drawn) and wait until it is drawn, for the run of ``n_tokens`` when given
    (``whole``: as in ``wait_drawn``); seconds from the click."""
    started = time.perf_counter()
    await page.locator(".bk-tab", has_text=tab).click()
    await wait_drawn(page, tab, n_tokens, whole=whole)
    return time.perf_counter() - started


async def type_prompt(page: Page, prompt: str) -> None:
    """Type a prompt once the page is idle, without running it."""
    await wait_until_idle(page)
    await page.locator(PROMPT_BOX).fill(prompt)
    await page.wait_for_timeout(300)


async def run_prompt(page: Page, prompt: str, n_tokens: int) -> None:
    """Type a prompt, press Enter, and wait until the status line has changed (a prompt run again reports the same
    token count, so that alone would not show the new run) and reports the token count with no work in progress."""
    status = page.locator(".status-line")
    await status.evaluate(WATCH_STATUS)
    box = page.locator(PROMPT_BOX)
    await box.fill(prompt)
    await box.press("Enter")
    await page.wait_for_function("() => window.statusChanged", timeout=TIMEOUT_MS)
    await expect(status).to_contain_text(f" {n_tokens} tokens ", timeout=TIMEOUT_MS)
    await expect(status).not_to_contain_text("…", timeout=TIMEOUT_MS)


async def run_until_updated(page: Page, tab: str, n_tokens: int) -> float:
    """Click Run and wait until the status line and the shown ``tab`` are updated; seconds from the click to the
    frame that drew them, as the page measured it."""
    titled = [name for name in FIGURES_BY_TAB[tab] if name != "block_diagram"]
    await page.evaluate(RUN_DRAWN, [titled, rf"(^|\D){n_tokens} tokens", TIMEOUT_MS])
    await page.get_by_role("button", name="Run", exact=True).click()
    milliseconds = await page.evaluate("window.runDrawn")
    await expect(page.locator(".status-line")).to_contain_text(f" {n_tokens} tokens ", timeout=TIMEOUT_MS)
    await wait_drawn(page, tab, n_tokens)
    return milliseconds / 1000


async def click_part(page: Page, part: str, pinned: tuple[str, ...] = ()) -> None:
    """Click the centre of a diagram box once the diagram is drawn with it and shows ``pinned`` as pinned
    (pinning redraws the diagram)."""
    await page.wait_for_function(DIAGRAM_READY, arg=[part, list(pinned)], timeout=TIMEOUT_MS)
    await page.wait_for_timeout(DOUBLE_TAP_MS)
    point = await page.evaluate(PART_CENTER, part)
    await page.mouse.click(point["x"], point["y"])
