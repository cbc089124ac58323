"""Drive the served page in Chromium through Playwright's async API, as a visitor does: serve the app, type a
prompt, click Run, and wait until the status line and every figure of the shown tab are updated for that run.

Detection reads only what survives in-place updates: a figure's title names the run's token count ("· 32 tokens"),
BokehJS reports the figure's view has finished rendering, and the status line reads " 32 tokens ".
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from playwright.async_api import Browser, Page, expect

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from conftest import CHROMIUM, CHROMIUM_ARGS, ServedApp, serve_app  # noqa: E402
from test_page import FIGURES_BY_TAB, FIND_VIEW  # noqa: E402
from tiny_models import save_tiny_gpt2  # noqa: E402

PROMPT_BOX_PLACEHOLDER = "Type a prompt, press Enter"
PROMPT_BOX = f"input[placeholder='{PROMPT_BOX_PLACEHOLDER}']"
NORMS_TAB = "Norms & sinks"
VIEWPORT = {"width": 1366, "height": 768}
TIMEOUT_MS = 300_000
POLL_MS = 50
MODEL_SHAPES = {"gpt2-small": {"n_layer": 12, "n_embd": 768, "n_head": 12},
                "tiny": {"n_layer": 3, "n_embd": 48, "n_head": 4}}

DRAWN = f"""([names, titled, countPattern]) => {{
    if (!window.Bokeh?.index) return false;
    const find = {FIND_VIEW};
    const counted = new RegExp(countPattern);
    return titled.every(name => counted.test(find(name)?.model.title?.text ?? ""))
        && names.every(name => find(name)?.has_finished());
}}"""


def save_gpt2_shaped(folder: Path, shape: str) -> Path:
    """A random GPT-2 of a named shape with GPT-2's tokenizer and 1024 positions (random weights cost the same
    compute as trained ones)."""
    return save_tiny_gpt2(folder, n_positions=1024, **MODEL_SHAPES[shape])


def repeated_words(n_tokens: int) -> str:
    """"word word …": with GPT-2's tokenizer, BOS plus this prompt is exactly ``n_tokens`` tokens."""
    return "word" + " word" * (n_tokens - 2)


@contextmanager
def served(models: str, log_path: Path, *, warm: bool = True):
    """A ``panel serve viz_app`` on ``models`` for the ``with`` block; its whole process group is stopped after."""
    process, app = serve_app(models, log_path, warm=warm)
    try:
        yield app
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def tracebacks_in(app: ServedApp) -> int:
    return app.log_without_closed_tab_reports().count("Traceback")


async def launch_chromium(playwright, *, niceness: int = 0) -> Browser:
    """Debian's chromium, headless (``playwright install`` cannot run here), at the given CPU niceness (19: it
    renders only in the time every other process leaves)."""
    if not niceness:
        return await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    with tempfile.TemporaryDirectory() as folder:  # the script execs chromium, so it is needed only to launch
        niced = Path(folder) / "chromium"
        niced.write_text(f'#!/bin/sh\nexec nice -n {niceness} {CHROMIUM} "$@"\n')
        niced.chmod(0o755)
        return await playwright.chromium.launch(executable_path=str(niced), args=CHROMIUM_ARGS)


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
    """Click Run and wait until the status line and the shown ``tab`` are updated; seconds from the click."""
    started = time.perf_counter()
    await page.get_by_role("button", name="Run", exact=True).click()
    await expect(page.locator(".status-line")).to_contain_text(f" {n_tokens} tokens ", timeout=TIMEOUT_MS)
    await wait_drawn(page, tab, n_tokens)
    return time.perf_counter() - started
