"""Download buttons: a table as CSV, built only when the button is pressed."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO

import pandas as pd
import panel as pn


def csv_download(make_table: Callable[[], pd.DataFrame], filename: str, label: str) -> pn.widgets.FileDownload:
    """A button that downloads ``make_table()`` as a CSV file."""
    return pn.widgets.FileDownload(callback=lambda: StringIO(make_table().to_csv()), filename=filename,
                                   label=label, color="light", width=300, embed=False)
