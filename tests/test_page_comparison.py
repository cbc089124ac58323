"""Two revisions of one model side by side on the served page's Norms tab (a fake HF cache, offline, 1024×768),
chosen by the link and by the "compare with" selector."""

from __future__ import annotations

import re

from urllib.parse import quote

from conftest import RUN_SECONDS, assert_served_cleanly
from hf_revisions import REPO_ID, write_two_revisions
from playwright.sync_api import Page, expect
from test_page import ARTIFACTS, MARKED_PIXELS, TITLES, marked_pixels

from page_driving.locators import FIND_VIEW
from page_driving.server import serve_app, stop_server
from page_driving.sync_steps import wait_until_settled

STEP = f"{REPO_ID}@step1000"
HEATMAPS = ["comparison_heatmap_0", "comparison_heatmap_1"]
SHOWN = f"""names => names.map(name => ({FIND_VIEW})(name)?.el.getBoundingClientRect().height > 0)"""
BOTH_TITLED = f"""() => {{ const [a, b] = ({TITLES})({HEATMAPS});
                          return a?.startsWith("{REPO_ID} · ") && b?.startsWith("{STEP} · "); }}"""


def assert_both_heatmaps_shown(page: Page) -> None:
    """Both revisions' heatmaps on screen, each titled with its revision's name and drawn (not a blank canvas)."""
    assert page.evaluate(SHOWN, HEATMAPS) == [True, True]
    first, second = page.evaluate(TITLES, HEATMAPS)
    assert first.startswith(f"{REPO_ID} · ") and second.startswith(f"{STEP} · "), (first, second)
    for name in HEATMAPS:
        marked = marked_pixels(page, name)
        assert marked >= MARKED_PIXELS, (name, marked)


def test_the_norms_tab_shows_both_revisions_under_their_names(page: Page, tmp_path):
    cache = write_two_revisions(tmp_path / "hub")
    process, app = serve_app(f"{REPO_ID},{STEP}", tmp_path / "server.log", environment={"HF_HUB_CACHE": str(cache)})
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_viewport_size({"width": 1024, "height": 768})
    try:
        page.goto(f"{app.url}?compare={quote(STEP)}")
        expect(page.locator(".status-line")).to_contain_text(re.compile(r"float32(, bfloat16 matmuls)? on cpu"),
                                                             timeout=RUN_SECONDS)
        wait_until_settled(page)
        page.locator(".bk-tab", has_text="Norms & sinks").click()
        page.wait_for_function(BOTH_TITLED, timeout=RUN_SECONDS)
        wait_until_settled(page)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=ARTIFACTS / "norms-comparison.png", full_page=True)
        assert_both_heatmaps_shown(page)
        selector = page.locator("select:has(option[value='nothing'])")
        selector.select_option("nothing")
        page.wait_for_function("() => !location.search.includes('compare=')", timeout=RUN_SECONDS)
        wait_until_settled(page)
        assert page.evaluate(SHOWN, HEATMAPS) == [False, False]
        selector.select_option(STEP)
        page.wait_for_function("() => location.search.includes('compare=')", timeout=RUN_SECONDS)
        wait_until_settled(page)
        page.wait_for_function(f"() => ({SHOWN})({HEATMAPS}).every(Boolean) && ({BOTH_TITLED})()", timeout=RUN_SECONDS)
        assert_both_heatmaps_shown(page)
        page.close()
    finally:
        stop_server(process)
    assert_served_cleanly(app, errors)
