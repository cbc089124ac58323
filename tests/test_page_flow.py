"""The Information flow tab in a real browser on the shipped demo model (the tiny random models' attention shares
all fall under the threshold: their residual carries everything): the graph of the run's routes is drawn with its
identity check passing, and a click on an attention edge opens the Attention tab at that edge's block and head."""

from __future__ import annotations

import re

import pytest
from conftest import RUN_SECONDS, assert_served_cleanly, load_as_served
from playwright.sync_api import expect

from model_backend import capture_run
from page_driving.locators import FIND_VIEW
from page_driving.server import REPO_ROOT, serve_app, stop_server
from page_driving.sync_steps import run_prompt
from test_page import ARTIFACTS, PROMPT

DEMO = REPO_ROOT / "assets" / "demo-gpt2"


@pytest.fixture(scope="module")
def served_app(tmp_path_factory):
    """This module's server, on the demo model."""
    process, app = serve_app(str(DEMO), tmp_path_factory.mktemp("server") / "server.log")
    yield app
    stop_server(process)
    assert_served_cleanly(app)

EDGE = f"""() => {{
    const view = ({FIND_VIEW})("flow_graph");
    const edges = view.model.renderers.find(r => r.name === "flow_edges_attention").data_source.data;
    if (!edges.x0.length) return null;
    const i = edges.share.indexOf(Math.max(...edges.share));
    view.el.scrollIntoView({{block: "center"}});
    const canvas = view.canvas_view.el.getBoundingClientRect();
    const x = (edges.x0[i] + edges.x1[i]) / 2, y = (edges.y0[i] + edges.y1[i]) / 2;
    return {{x: canvas.left + view.frame.x_scale.compute(x), y: canvas.top + view.frame.y_scale.compute(y),
             layer: edges.layer[i], head: edges.head[i]}};
}}"""
CHECK = re.compile(r"(\d\.\d+e[+-]\d+)")


def test_the_routes_are_drawn_checked_and_an_edge_opens_its_head(page_with_checks):
    page = page_with_checks
    run = capture_run(load_as_served(DEMO), PROMPT, bos=True)
    run_prompt(page, PROMPT, run.seq_len)
    page.locator(".bk-tab", has_text="Flow").click()
    page.wait_for_function(f"() => ({FIND_VIEW})('flow_graph')?.model.title.text.includes('{run.seq_len} tokens')",
                           timeout=60_000)
    check = page.locator(".flow-check").inner_text()
    assert all(float(error) <= 1e-3 for error in CHECK.findall(check)), check
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "page-flow.png", full_page=True)
    for _ in range(2):  # the same edge clicked again opens its head again
        page.locator(".bk-tab", has_text="Flow").click()
        edge = page.evaluate(EDGE)
        assert edge is not None
        page.mouse.click(edge["x"], edge["y"])
        expect(page.locator(".bk-tab.bk-active")).to_have_text("Attention", timeout=RUN_SECONDS)
        expect(page.locator(".bk-input-group", has_text="head").locator("select").first).to_have_value(
            re.compile(rf"{edge['head']}$"))
