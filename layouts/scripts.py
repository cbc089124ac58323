"""The views' BokehJS callbacks, kept as JavaScript files in ``layouts/js/`` and read once when a view module is
imported. They reach into BokehJS internals (``Bokeh.index``, a glyph view's screen coordinates); the browser tests
that check the scrolling and the marks fail when BokehJS changes them."""

from __future__ import annotations

from functools import cache
from pathlib import Path

SCRIPTS = Path(__file__).parent / "js"


@cache
def script(name: str) -> str:
    """The JavaScript of ``layouts/js/<name>``."""
    return (SCRIPTS / name).read_text()
