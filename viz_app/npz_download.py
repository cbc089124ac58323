"""The run's NPZ download: written on a model thread to a temporary file, then streamed from it by Tornado.

Panel's FileDownload reads the whole file on the event loop and sends it base64-encoded over the websocket: every
page stalls while a run of a few hundred tokens (tens of MB) is read, and the base64 copy is larger than the file
(docs/performance.md has the figures). Here the page gets a link; Tornado's static file handler sends the
file in chunks, with the server's own authentication (``--basic-auth`` or OAuth), and an unguessable name keeps
each page's file its own.
"""

from __future__ import annotations

import logging
import re
import secrets
import shutil
import tempfile
from pathlib import Path

from panel.io.server import AuthenticatedStaticFileHandler

from model_backend import LoadedModel, Run, write_npz
from viz_app.panel_internals import tornado_application

log = logging.getLogger(__name__)

DOWNLOADS_ROUTE = "/rse-downloads"
DOWNLOADS = Path(tempfile.mkdtemp(prefix="rse-downloads-"))
_served_by: set[int] = set()
FILE_NAME_CHARACTERS = 60


class NpzFileHandler(AuthenticatedStaticFileHandler):
    """Sends a page's NPZ file in chunks, as an attachment under its own name (model and prompt)."""

    def set_extra_headers(self, path: str) -> None:
        self.set_header("Content-Disposition", f'attachment; filename="{Path(path).name}"')
        self.set_header("Cache-Control", "no-store")


def serve_downloads(document) -> bool:
    """Add the downloads route to the Tornado application serving ``document``, once per application; False
    where there is none (a notebook)."""
    application = tornado_application(document)
    if application is None:
        return False
    if id(application) not in _served_by:
        application.add_handlers(r".*", [(rf"{DOWNLOADS_ROUTE}/(.*)", NpzFileHandler, {"path": str(DOWNLOADS)})])
        _served_by.add(id(application))
    return True


def npz_file_name(model_name: str, prompt: str) -> str:
    """``<model>-<first words of the prompt>.npz`` in ASCII letters, digits and dashes (safe in a header and a URL)."""
    words = re.sub(r"[^A-Za-z0-9]+", "-", f"{model_name.rsplit('/', 1)[-1]} {prompt}").strip("-")
    return f"{words[:FILE_NAME_CHARACTERS].rstrip('-') or 'run'}.npz"


def new_npz_path(file_name: str) -> Path:
    """A fresh path for ``file_name`` under an unguessable folder of its own."""
    folder = DOWNLOADS / secrets.token_urlsafe(24)
    folder.mkdir()
    return folder / file_name


def npz_link(path: Path, served: bool) -> str:
    """Where the browser fetches ``path``: the downloads route when served, else the file itself (a notebook)."""
    return f"{DOWNLOADS_ROUTE}/{path.relative_to(DOWNLOADS).as_posix()}" if served else path.as_uri()


def remove_npz(path: Path | None) -> None:
    """Delete a page's earlier file (a newer one replaced it, or the page closed)."""
    if path is not None:
        shutil.rmtree(path.parent, ignore_errors=True)


def write_npz_file(loaded: LoadedModel, run: Run, path: Path) -> Path:
    """Write the run's NPZ to ``path`` (on a model thread: a long run of a large model takes many seconds)."""
    write_npz(loaded, run, path)
    return path
