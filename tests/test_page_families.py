"""Every family's tiny checkpoint served by ``panel serve viz_app``: the page runs a prompt and draws every tab.

The checkpoints are the ones each ``test_family_*.py`` declares in ``CONFIGS``, so a new family's test brings its
model here without an edit to this file.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from conftest import RUN_SECONDS, assert_served_cleanly, load_as_served
from family_reference import save_tiny_family_model
from playwright.sync_api import Page, expect
from test_page import PROMPT, TITLES, assert_the_tab_shows_the_run, n_tokens_of

from page_driving.locators import FIGURES_BY_TAB
from page_driving.server import serve_app, stop_server
from page_driving.sync_steps import run_prompt, show_tab, wait_until_settled

FAMILY_CONFIGS = {name: config
                  for path in sorted(Path(__file__).parent.glob("test_family_*.py"))
                  for name, config in importlib.import_module(path.stem).CONFIGS.items()}


@pytest.mark.parametrize("family_name", FAMILY_CONFIGS)
def test_every_tab_draws_for_the_family(page: Page, tmp_path, family_name):
    folder = save_tiny_family_model(tmp_path / "model", FAMILY_CONFIGS[family_name])
    model = load_as_served(folder)
    n_tokens = n_tokens_of(model, PROMPT)
    process, app = serve_app(str(folder), tmp_path / "server.log")
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(app.url)
        expect(page.locator(".status-line")).to_contain_text("tokens", timeout=RUN_SECONDS)
        wait_until_settled(page)
        run_prompt(page, PROMPT, n_tokens)
        for tab in FIGURES_BY_TAB:
            show_tab(page, tab, n_tokens)
            page.mouse.move(0, 0)  # no tooltip over the figures
            assert_the_tab_shows_the_run(page, tab, n_tokens)
        [diagram_title] = page.evaluate(TITLES, ["block_diagram"])
        assert diagram_title.startswith(f"{model.family.name} architecture · "), diagram_title
        wait_until_settled(page)
        page.close()
    finally:
        stop_server(process)
    assert_served_cleanly(app, errors)
