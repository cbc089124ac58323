"""Run → drawn latency of the served page, for a 32- and a 512-token prompt (opt-in: RSE_MEASURE=1).

Only the open tab is drawn, so this measures the Run click until the status line and the open tab are updated,
then how long each other tab takes to draw when opened. Results go to test-artifacts/latency.txt.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from conftest import serve_app
from playwright.sync_api import Page, expect
from test_page import ARTIFACTS, FIGURES_BY_TAB, FIND_VIEW, TITLES
from tiny_models import save_tiny_gpt2

pytestmark = pytest.mark.skipif(not os.environ.get("RSE_MEASURE"), reason="set RSE_MEASURE=1 to measure")
LENGTHS = (32, 512)
TIMEOUT = 300_000


@pytest.fixture(scope="module")
def long_context_app(tmp_path_factory):
    """A server on a tiny GPT-2 that reads 640 positions (or RSE_MEASURE_MODEL, e.g. a GPT-2-small-shaped one)."""
    models = os.environ.get("RSE_MEASURE_MODEL") or str(
        save_tiny_gpt2(tmp_path_factory.mktemp("models") / "tiny-gpt2-640", n_positions=640))
    process, app = serve_app(models, tmp_path_factory.mktemp("server") / "server.log")
    yield app
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=10)


def drawn(page: Page, tab: str, n_tokens: int) -> None:
    names = [n for n in FIGURES_BY_TAB[tab] if n != "block_diagram"]
    page.wait_for_function(f"""() => ({TITLES})({names}).every(t => t && t.includes("{n_tokens} tokens"))
                               && {list(FIGURES_BY_TAB[tab])}.every(n => ({FIND_VIEW})(n)?.has_finished())""",
                           timeout=TIMEOUT, polling=50)


def test_run_to_drawn_latency(page: Page, long_context_app):
    page.goto(long_context_app.url)
    expect(page.locator(".status-line")).to_contain_text("tokens", timeout=TIMEOUT)
    lines = []
    for n_tokens in LENGTHS:
        expect(page.locator(".status-line")).not_to_contain_text("…", timeout=TIMEOUT)  # the last sweep is done
        page.locator(".bk-tab", has_text="Norms & sinks").click()
        box = page.locator("input[placeholder='Type a prompt, press Enter']")
        box.fill("word" + " word" * (n_tokens - 2))  # BOS + n - 1 tokens
        page.wait_for_timeout(1000)
        started = time.perf_counter()
        page.get_by_role("button", name="Run", exact=True).click()
        expect(page.locator(".status-line")).to_contain_text(f" {n_tokens} tokens ", timeout=TIMEOUT)
        status = time.perf_counter() - started
        drawn(page, "Norms & sinks", n_tokens)
        first_tab = time.perf_counter() - started
        tabs = {}
        for tab in FIGURES_BY_TAB:
            opened = time.perf_counter()
            page.locator(".bk-tab", has_text=tab).click()
            drawn(page, tab, n_tokens)
            tabs[tab] = time.perf_counter() - opened
        lines.append(f"{n_tokens} tokens: status {status:.2f} s, Norms tab drawn {first_tab:.2f} s, every tab "
                     f"drawn {first_tab + sum(tabs.values()):.2f} s; per tab "
                     + ", ".join(f"{tab} {seconds:.2f} s" for tab, seconds in tabs.items())
                     + f" | {page.locator('.status-line').inner_text()}")
    ARTIFACTS.mkdir(exist_ok=True)
    with (ARTIFACTS / "latency.txt").open("a") as report:
        report.write("\n".join(lines) + "\n")
    print("\n".join(lines))
