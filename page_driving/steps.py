"""A visitor's steps on the served page in Playwright's async API: type a prompt, click Run, open a tab, and wait
until the status line and every figure of the shown tab are updated for that run.

Detection reads only what survives in-place updates: a figure's title names the run's token count ("· 32 tokens"),
BokehJS reports the figure's view has finished rendering, and the status line reads " 32 tokens ". A run is timed by
the page itself, from the click's event to the animation frame that finds the figures drawn; it watches the Bokeh
document's changes instead of polling, so the measuring costs the two cores nothing while the model runs.
"""

from __future__ import annotations

import asyncio
import time

from playwright.async_api import Page, expect

from page_driving.locators import FIGURES_BY_TAB, FIND_VIEW, PROMPT_BOX

TIMEOUT_MS = 300_000
POLL_MS = 50

DRAWN = f"""([names, titled, countPattern]) => {{
    if (!window.Bokeh?.index) return false;
    const find = {FIND_VIEW};
    const counted = new RegExp(countPattern);
    return titled.every(name => counted.test(find(name)?.model.title?.text ?? ""))
        && names.every(name => find(name)?.has_finished());
}}"""


RUN_DRAWN = f"""([names, countPattern]) => {{
    const find = {FIND_VIEW};
    const counted = new RegExp(countPattern);
    const titled = () => names.every(name => counted.test(find(name)?.model.title?.text ?? ""));
    const drawn = () => names.every(name => find(name)?.has_finished());
    const doc = Bokeh.documents[0];
    window.runDrawn = new Promise(resolve => {{
        let clicked = null;
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


async def wait_until_idle(page: Page) -> None:
    """Wait until the status line shows no work in progress (busy messages end with an ellipsis)."""
    await expect(page.locator(".status-line")).not_to_contain_text("…", timeout=TIMEOUT_MS)


async def wait_drawn(page: Page, tab: str, n_tokens: int | None = None) -> None:
    """Wait until every figure of ``tab`` has finished rendering and, when given, names ``n_tokens`` in its title."""
    names = list(FIGURES_BY_TAB[tab])
    titled = [name for name in names if n_tokens is not None and name != "block_diagram"]
    await page.wait_for_function(DRAWN, arg=[names, titled, rf"(^|\D){n_tokens} tokens"], timeout=TIMEOUT_MS,
                                 polling=POLL_MS)


async def show_tab(page: Page, tab: str, n_tokens: int | None = None) -> float:
    """Open a tab and wait until it is drawn (for the run of ``n_tokens`` when given); seconds from the click."""
    started = time.perf_counter()
    await page.locator(".bk-tab", has_text=tab).click()
    await wait_drawn(page, tab, n_tokens)
    return time.perf_counter() - started


async def type_prompt(page: Page, prompt: str) -> None:
    """Type a prompt once the page is idle, without running it."""
    await wait_until_idle(page)
    await page.locator(PROMPT_BOX).fill(prompt)
    await page.wait_for_timeout(300)


async def run_until_updated(page: Page, tab: str, n_tokens: int) -> float:
    """Click Run and wait until the status line and the shown ``tab`` are updated; seconds from the click to the
    frame that drew them, as the page measured it."""
    titled = [name for name in FIGURES_BY_TAB[tab] if name != "block_diagram"]
    await page.evaluate(RUN_DRAWN, [titled, rf"(^|\D){n_tokens} tokens"])
    await page.get_by_role("button", name="Run", exact=True).click()
    milliseconds = await asyncio.wait_for(page.evaluate("window.runDrawn"), TIMEOUT_MS / 1000)
    await expect(page.locator(".status-line")).to_contain_text(f" {n_tokens} tokens ", timeout=TIMEOUT_MS)
    await wait_drawn(page, tab, n_tokens)
    return milliseconds / 1000
