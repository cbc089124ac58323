"""Screenshots of each guided lesson for the README, taken in chromium at 1024x768 on SmolLM2-135M-Instruct (the
page a fresh offline machine opens), in presenter mode with ``--presenter`` (as a projector shows them):

    python benchmarks/lesson_screenshots.py [--presenter] [OUT_FOLDER]   (default: assets/screenshots)
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from playwright.async_api import Page, async_playwright
from served_models import served

from layouts.state import ExplorerState
from model_backend.model_names import SMOLLM2
from page_driving.chromium import launch_chromium
from page_driving.server import REPO_ROOT
from page_driving.steps import TIMEOUT_MS, wait_until_idle

VIEWPORT = {"width": 1024, "height": 768}
LESSON_STEPS = ExplorerState.param.lesson.bounds[1]
SETTLE_MS = 1500
# The texts of a step still waiting for its view's results.
WAITING = ("Measuring this run", "Reading the logit lens", "Attributing the logit", "blocks so far")


async def wait_for_lesson_text(page: Page, step: int) -> str:
    """Wait until step ``step``'s heading is shown and its text holds this run's numbers; the text."""
    await page.locator(".lesson-title", has_text=f"Lesson {step} of").wait_for(timeout=TIMEOUT_MS)
    await page.wait_for_function(f"""() => {{
        const find = root => root.querySelector('.lesson-text[data-step="{step}"]') ||
            [...root.querySelectorAll('*')].map(e => e.shadowRoot && find(e.shadowRoot)).find(Boolean);
        const text = find(document)?.textContent ?? '';
        return text && !{list(WAITING)}.some(waiting => text.includes(waiting));
    }}""", timeout=TIMEOUT_MS, polling=200)
    await wait_until_idle(page)
    return await page.locator(".lesson-text").inner_text()


async def take(url: str, out: Path) -> list[Path]:
    """Open the page at ``url``, start the lessons, and save every step once its text and view are filled."""
    async with async_playwright() as playwright:
        browser = await launch_chromium(playwright)
        page = await browser.new_page(viewport=VIEWPORT)
        await page.goto(url)
        # attached, not visible: presenter mode folds the sidebar that holds it away
        await page.locator(".status-line").filter(has_text="tokens").wait_for(state="attached", timeout=TIMEOUT_MS)
        await wait_until_idle(page)
        await page.get_by_role("button", name="▶ Lessons").click()
        saved = []
        for step in range(1, LESSON_STEPS + 1):
            if step > 1:
                await page.get_by_role("button", name="Next ▶").click()
            print(step, await wait_for_lesson_text(page, step))
            await page.wait_for_timeout(SETTLE_MS)
            saved.append(out / f"lesson-{step}.png")
            await page.screenshot(path=str(saved[-1]))
        await browser.close()
        return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=REPO_ROOT / "assets" / "screenshots")
    parser.add_argument("--presenter", action="store_true", help="in presenter mode (?presenter=true)")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder, served(SMOLLM2, Path(folder) / "server.log") as app:
        url = app.url + ("?presenter=true" if options.presenter else "")
        for path in asyncio.run(take(url, options.out)):
            print(path)


if __name__ == "__main__":
    main()
