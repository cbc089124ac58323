"""Debian's chromium, headless, as the tests and the benchmarks launch it (``playwright install`` cannot run here)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from playwright.async_api import Browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1366, "height": 768}  # the projector's size


async def launch_chromium(playwright, *, niceness: int = 0) -> Browser:
    """Debian's chromium, headless, at the given CPU niceness (19: it renders only in the time every other process
    leaves)."""
    if not niceness:
        return await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    with tempfile.TemporaryDirectory() as folder:  # the script execs chromium, so it is needed only to launch
        niced = Path(folder) / "chromium"
        niced.write_text(f'#!/bin/sh\nexec nice -n {niceness} {CHROMIUM} "$@"\n')
        niced.chmod(0o755)
        return await playwright.chromium.launch(executable_path=str(niced), args=CHROMIUM_ARGS)
