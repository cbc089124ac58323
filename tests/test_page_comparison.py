"""Two revisions of one model side by side on the served page's Norms tab (a fake HF cache, offline, 1024×768),
chosen by the link and by the "compare with" selector."""

from __future__ import annotations

from urllib.parse import quote

from conftest import RUN_SECONDS, assert_served_cleanly, wait_until_idle
from hf_revisions import REPO_ID, write_two_revisions
from playwright.sync_api import Page, expect
from test_page import ARTIFACTS, TITLES

from page_driving.server import serve_app, stop_server

STEP = f"{REPO_ID}@step1000"


def test_the_norms_tab_shows_both_revisions_under_their_names(page: Page, tmp_path):
    cache = write_two_revisions(tmp_path / "hub")
    process, app = serve_app(f"{REPO_ID},{STEP}", tmp_path / "server.log", environment={"HF_HUB_CACHE": str(cache)})
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_viewport_size({"width": 1024, "height": 768})
    try:
        page.goto(f"{app.url}?compare={quote(STEP)}")
        expect(page.locator(".status-line")).to_contain_text("float32 on cpu", timeout=RUN_SECONDS)
        wait_until_idle(page)
        page.locator(".bk-tab", has_text="Norms & sinks").click()
        names = ["comparison_heatmap_0", "comparison_heatmap_1"]
        page.wait_for_function(f"""() => {{ const [a, b] = ({TITLES})({names});
                                   return a?.startsWith("{REPO_ID} · ") && b?.startsWith("{STEP} · "); }}""",
                               timeout=RUN_SECONDS)
        wait_until_idle(page)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=ARTIFACTS / "norms-comparison.png", full_page=True)
        selector = page.locator("select:has(option[value='nothing'])")
        selector.select_option("nothing")
        page.wait_for_function("() => !location.search.includes('compare=')", timeout=RUN_SECONDS)
        selector.select_option(STEP)
        page.wait_for_function("() => location.search.includes('compare=')", timeout=RUN_SECONDS)
        wait_until_idle(page)
        page.close()
    finally:
        stop_server(process)
    assert_served_cleanly(app, errors)
