"""Shared fixtures: tiny random-init checkpoints on disk, loaded through the real loading code."""

from __future__ import annotations

import asyncio
import inspect
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from model_backend import LoadedModel, ModelNotCachedError, capture_run, load_model  # noqa: E402
from page_driving.tiny_models import save_tiny_gpt2, save_tiny_llama  # noqa: E402
from viz_app.settings import configured_compute  # noqa: E402

PROMPT = "The capital of France is Paris, and the capital of Italy is"


def run_coroutine(coroutine):
    """Run a coroutine to its end in a thread of its own: pytest-playwright's sync API keeps an event loop running in
    the main thread once a browser test has run, and ``asyncio.run`` refuses to start under it."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


def package_index_model_or_skip(load, name: str, required_by: str):
    """``load()`` of a model the package index carries, or a skip saying why it could not be prepared here; where
    the environment sets ``required_by`` to 1 (CI does) the skip is a failure."""
    try:
        return load()
    except ModelNotCachedError as error:
        if os.environ.get(required_by) == "1":
            raise
        pytest.skip(f"{name} could not be prepared here: {error}")


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory) -> Path:
    return save_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def gpt2(tiny_gpt2_dir):
    return load_model(str(tiny_gpt2_dir))


@pytest.fixture(scope="session")
def llama(tiny_llama_dir):
    return load_model(str(tiny_llama_dir))


@pytest.fixture(scope="session", params=["gpt2", "llama"])
def loaded(request):
    """Each supported family's tiny model in turn."""
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="session")
def run(loaded):
    return capture_run(loaded, PROMPT, bos=True)


# ---------------------------------------------------------------------------------------------------------------
# Browser tests (tests/test_page.py): the system chromium, and a `panel serve viz_app` on a tiny GPT-2, both
# from page_driving (which the benchmarks drive too). Owned by the page's author; add other fixtures in their own
# section below.
# ---------------------------------------------------------------------------------------------------------------

from playwright.sync_api import Page, expect  # noqa: E402

from page_driving.chromium import CHROMIUM, CHROMIUM_ARGS, VIEWPORT  # noqa: E402
from page_driving.server import ServedApp, serve_app, stop_server  # noqa: E402
from page_driving.sync_steps import wait_until_settled  # noqa: E402


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """Point pytest-playwright at Debian's chromium (``playwright install`` cannot run here)."""
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    """The projector's size."""
    return {**browser_context_args, "viewport": VIEWPORT}


@pytest.fixture(scope="module")
def served_app(tiny_gpt2_dir, tmp_path_factory):
    """One server per test module offering GPT-2 (not cached, offline: reported, never fatal) then the tiny model;
    stopped with its whole process group; fails on a Traceback in its log, or a callback Panel reports failed (a
    closed page's session, destroyed about 15 s after, calls one)."""
    process, app = serve_app(f"gpt2,{tiny_gpt2_dir}", tmp_path_factory.mktemp("server") / "server.log")
    yield app
    stop_server(process)
    assert_served_cleanly(app)


def assert_served_cleanly(app: ServedApp, browser_errors: list[str] = ()) -> None:
    """No error in the browser, and no Traceback or failed callback in the server's log."""
    log = app.log_without_closed_tab_reports()
    assert not browser_errors, browser_errors
    assert "Traceback" not in log and "failed with following error" not in log, app.log()

RUN_SECONDS = 30_000  # milliseconds a run may take to show, on two shared cores


def load_as_served(source) -> LoadedModel:
    """A model loaded in this process as ``panel serve viz_app`` loads it (same device and dtype, bfloat16 matmuls
    where the CPU has them), to compute what the page should show."""
    return load_model(str(source), **configured_compute([]))


@pytest.fixture(scope="module")
def tiny_model(tiny_gpt2_dir):
    """The same tiny model the server loads, in this process, to compute what the page should show."""
    return load_as_served(tiny_gpt2_dir)


@pytest.fixture
def page_with_checks(page: Page, served_app):
    """The page, opened and settled after its first run; fails the test on a browser console error."""
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("requestfailed", lambda request: errors.append(f"request failed: {request.url}"))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(served_app.url)
    expect(page.locator(".status-line")).to_contain_text("tokens", timeout=RUN_SECONDS)
    wait_until_settled(page)
    yield page
    wait_until_settled(page)
    assert not errors, errors


# --------------------------------------------------- end of browser fixtures ------------------------------------

BROWSER_FIXTURES = {"page", "context", "browser", "served_app", "page_with_checks"}


def serves_the_app(item) -> bool:
    """Whether the test, or a fixture of its own module it uses, calls ``serve_app``."""
    module = getattr(item, "module", None)
    own = [item.function] + [getattr(module, name) for name in item.fixturenames if hasattr(module, name)]
    return any("serve_app(" in inspect.getsource(code) for code in own if callable(code))


# The files whose tests take longest, run first: the parallel suite hands out whole files in this order, and a long
# file handed out last would leave the other workers idle while it ends.
LONGEST_FILES = ("test_lessons_on_smollm2.py", "test_gemma3.py", "test_page_lessons.py", "test_page_families.py")


def pytest_collection_modifyitems(items) -> None:
    """Mark ``browser`` every test that opens chromium or serves the app, so that ``pytest -m "not browser"`` runs
    the backend and layout tests alone; put the longest files first (in their own order, each file's tests in
    theirs)."""
    for item in items:
        if BROWSER_FIXTURES.intersection(item.fixturenames) or serves_the_app(item):
            item.add_marker(pytest.mark.browser)
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
