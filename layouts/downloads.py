"""Download buttons: a table as CSV, built only when the button is pressed, with cells a spreadsheet would read as
a formula (a token such as ``=cmd|…``) escaped."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO

import pandas as pd
import panel as pn


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def escaped_cell(value):
    """A text cell a spreadsheet would run as a formula, with a leading apostrophe (OWASP's CSV injection advice)."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def spreadsheet_safe(table: pd.DataFrame) -> pd.DataFrame:
    """The table with every text cell, index label and column name escaped."""
    safe = table.map(escaped_cell)
    safe.index = safe.index.map(escaped_cell)
    safe.columns = safe.columns.map(escaped_cell)
    return safe


def csv_download(make_table: Callable[[], pd.DataFrame], filename: str, label: str) -> pn.widgets.FileDownload:
    """A button that downloads ``make_table()`` as a CSV file."""
    return pn.widgets.FileDownload(callback=lambda: StringIO(spreadsheet_safe(make_table()).to_csv()),
                                   filename=filename, label=label, color="light", width=300, embed=False)
