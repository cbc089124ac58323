"""The guided lessons on SmolLM2 in the browser, in presenter mode at 1024x768: every step's text shows the numbers
this process computes for the real model, its sink and " Paris" included. Its own file, so that a worker of the
parallel suite runs this long test while the others run the rest."""

from __future__ import annotations

import os
import signal

from playwright.sync_api import Page

from conftest import load_as_served, package_index_model_or_skip
from model_backend.model_names import SMOLLM2
from page_driving.server import serve_app
from test_page_lessons import expected_numbers, step_through_lessons


def test_the_lessons_show_smollm2s_sink_and_paris(page: Page, tmp_path):
    """All eight steps on the real model in presenter mode at 1024x768, lesson 8's steering and commitment marks
    included, each with its text and mark on screen."""
    smollm2 = package_index_model_or_skip(lambda: load_as_served(SMOLLM2), "SmolLM2", "RSE_REQUIRE_SMOLLM2")
    expected = {**expected_numbers(smollm2), "name": "smollm2"}
    expected[2] += ["<|im_start|>", "from block"]
    expected[4].append("␣Paris")
    process, app = serve_app(SMOLLM2, tmp_path / "server.log")
    try:
        os.makedirs("test-artifacts", exist_ok=True)
        step_through_lessons(page, app.url, expected, presenter=True)  # the projector's text: the hardest fit
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    assert "Traceback" not in app.log_without_closed_tab_reports(), app.log()
