"""Screenshots of every tab for the README, taken in chromium at 1366x768 on the page a fresh offline machine opens
(SmolLM2-135M-Instruct, prepared from the package index if needed):

    python benchmarks/screenshots.py [--models NAMES] [--out assets/screenshots] [--width 1366 --height 768]
    python benchmarks/screenshots.py --presenter --width 1024 --out /tmp/presenter   (as a projector shows them)
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from playwright.async_api import async_playwright
from served_models import served

from page_driving.chromium import launch_chromium
from page_driving.server import REPO_ROOT
from page_driving.steps import wait_until_idle

TABS = ("Block diagram", "Write", "Norms & sinks", "Cosine similarity", "Logit lens", "Logit attribution", "Attention",
        "Flow", "Intervention", "Patching")
SETTLE_MS = 1500
QUIET_CHECKS = 4  # the status line shows no work in progress this many times in a row, SETTLE_MS apart


def file_name(tab: str) -> str:
    return tab.lower().replace(" & ", "-").replace(" ", "-") + ".png"


async def wait_until_quiet(page) -> None:
    """Wait until the page has shown no work in progress for a while: a tab's later reads (the lens's other
    positions, the sweep's next block) start after the first ones end."""
    quiet = 0
    while quiet < QUIET_CHECKS:
        await page.wait_for_timeout(SETTLE_MS)
        quiet = quiet + 1 if "…" not in await page.locator(".status-line").text_content() else 0


async def take(url: str, out: Path, viewport: dict, url_query: str, tabs: tuple[str, ...] = TABS) -> list[Path]:
    """Open the page, let its first run finish, then show each tab and save what it looks like."""
    async with async_playwright() as playwright:
        browser = await launch_chromium(playwright)
        page = await browser.new_page(viewport=viewport)
        await page.goto(url + url_query)
        # attached, not visible: presenter mode folds the sidebar that holds it away
        await page.locator(".status-line").filter(has_text="tokens").wait_for(state="attached", timeout=300_000)
        await wait_until_idle(page)
        saved = []
        for tab in tabs:
            await page.locator(".bk-tab", has_text=tab).click()
            await page.wait_for_timeout(SETTLE_MS)
            if tab == "Intervention":
                await page.get_by_role("button", name="Scale each block").click()
            if tab == "Write":  # the default steering beside the plain continuation
                await page.locator(".bk-label", has_text="steer").first.click()
                await page.get_by_role("button", name="Write").click()
                await page.locator(".write-check").wait_for(timeout=300_000)
            await wait_until_quiet(page)
            saved.append(out / file_name(tab))
            await page.screenshot(path=str(saved[-1]))
        await browser.close()
        return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--out", default=str(REPO_ROOT / "assets" / "screenshots"))
    parser.add_argument("--width", type=int, default=1366)
    parser.add_argument("--height", type=int, default=768)
    parser.add_argument("--query", default="?pinned=%5B%22block.3%22%5D", help="URL query the page opens with")
    parser.add_argument("--presenter", action="store_true", help="in presenter mode (adds presenter=true)")
    parser.add_argument("--tabs", default=",".join(TABS), help="the tabs to take, comma-separated")
    arguments = parser.parse_args()
    out = Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder, served(arguments.models, Path(folder) / "server.log") as app:
        viewport = {"width": arguments.width, "height": arguments.height}
        query = arguments.query
        if arguments.presenter:
            query += ("&" if "?" in query else "?") + "presenter=true"
        tabs = tuple(arguments.tabs.split(","))
        for path in asyncio.run(take(app.url, out, viewport, query, tabs)):
            print(path)


if __name__ == "__main__":
    main()
