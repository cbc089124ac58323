"""The visitor's steps are written once (``page_driving/steps.py``, async) and read as sync code for the tests."""

from __future__ import annotations

import ast
import inspect

import playwright.sync_api

from page_driving import steps, sync_steps
from page_driving.sync_steps import Unasync


def test_async_playwright_code_reads_as_the_same_sync_code():
    source = '''
from playwright.async_api import Page, expect

async def step(page: Page) -> float:
    await expect(page.locator("x")).to_be_visible()
    return len(await page.evaluate(await page.title()))
'''
    assert ast.unparse(Unasync().visit(ast.parse(source))) == ast.unparse(ast.parse('''
from playwright.sync_api import Page, expect

def step(page: Page) -> float:
    expect(page.locator("x")).to_be_visible()
    return len(page.evaluate(page.title()))
'''))


def test_every_step_has_a_sync_twin_from_the_same_lines():
    async_steps = {name: step for name, step in vars(steps).items() if inspect.iscoroutinefunction(step)}
    assert {"run_prompt", "show_tab", "click_part", "wait_until_settled"} <= set(async_steps)
    for name, step in async_steps.items():
        twin = getattr(sync_steps, name)
        assert inspect.isfunction(twin) and not inspect.iscoroutinefunction(twin), name
        assert inspect.signature(twin) == inspect.signature(step), name
        assert (twin.__code__.co_filename, twin.__code__.co_firstlineno) == (step.__code__.co_filename,
                                                                             step.__code__.co_firstlineno), name
    assert sync_steps.expect is playwright.sync_api.expect and sync_steps.Page is playwright.sync_api.Page
    assert sync_steps.__doc__ != steps.__doc__
