"""A page closed in the browser: its server session ends and stops the page's long jobs."""

from __future__ import annotations

import os
import signal
import time

from playwright.sync_api import Browser, expect

from conftest import RUN_SECONDS
from test_page import MARKED_PIXELS, marked_pixels

from page_driving.server import serve_app
from page_driving.sync_steps import show_tab, wait_until_settled

SESSION_ENDS_MS = "300"  # how soon the server ends a session nobody is connected to (Bokeh's default: 15 s)


def test_a_closed_pages_session_ends_and_stops_its_jobs(browser: Browser, tiny_gpt2_dir, tmp_path):
    process, app = serve_app(str(tiny_gpt2_dir), tmp_path / "server.log",
                             server_options=("--check-unused-sessions", SESSION_ENDS_MS,
                                             "--unused-session-lifetime", SESSION_ENDS_MS))
    try:
        page = browser.new_page()
        page.goto(app.url)
        expect(page.locator(".status-line")).to_contain_text(" tokens ", timeout=RUN_SECONDS)
        wait_until_settled(page)
        expect(page.locator(".status-line")).to_contain_text(f"{tiny_gpt2_dir.name} (local folder)")
        show_tab(page, "Block diagram")  # the page as its visitor left it: the served model's diagram, drawn
        assert marked_pixels(page, "block_diagram") >= MARKED_PIXELS
        page.close()
        deadline = time.monotonic() + 20
        while "a page closed" not in app.log() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    log = app.log_without_closed_tab_reports()
    assert "a page closed: its jobs stop" in log, log
    assert "Traceback" not in log and "failed with following error" not in log, log
