"""A ``panel serve viz_app`` in its own process group on a free port, started and stopped as the tests and the
benchmarks do, with its log."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVER_START_SECONDS = 120
# Tornado's report of a browser tab that closed while a message to it was in flight: not the app's failure.
CLOSED_TAB_REPORT = re.compile(r"Task exception was never retrieved\nfuture: <Task finished name='[^']*' "
                               r"coro=<WebSocketProtocol13\.write_message.*?tornado\.websocket\.WebSocketClosedError\n",
                               re.DOTALL)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServedApp:
    """A running ``panel serve viz_app`` and its log."""

    def __init__(self, url: str, log_path: Path):
        self.url = url
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_without_closed_tab_reports(self) -> str:
        return CLOSED_TAB_REPORT.sub("", self.log())


def serve_app(models: str | None, log_path: Path, *, warm: bool = True, server_options: tuple[str, ...] = (),
              port: int | None = None, environment: dict[str, str] | None = None,
              app_options: tuple[str, ...] = ()) -> tuple[subprocess.Popen, ServedApp]:
    """Start the server in its own process group on a free port and wait for /liveness.

    ``models`` None serves the default list, as ``panel serve viz_app`` does on a fresh clone; ``warm`` loads them
    before the first visitor; ``server_options`` go to ``panel serve`` as they are; ``port`` is a free one unless
    given; ``environment`` adds variables; ``app_options`` go to the app after ``--args`` (``--device cuda``).
    """
    port = port or free_port()
    command = [sys.executable, "-m", "panel", "serve", "viz_app", "--port", str(port), "--liveness", *server_options]
    if warm:
        command.append("--warm")
    app_arguments = [*(["--models", models] if models is not None else []), *app_options]
    if app_arguments:
        command += ["--args", *app_arguments]
    log_file = log_path.open("w")
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log_file, stderr=subprocess.STDOUT,
                               env={**os.environ, "HF_HUB_OFFLINE": "1", **(environment or {})},
                               start_new_session=True)
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/liveness", timeout=1):
                return process, ServedApp(f"http://127.0.0.1:{port}/viz_app", log_path)
        except OSError:
            time.sleep(0.2)
    os.killpg(process.pid, signal.SIGTERM)
    raise RuntimeError(f"panel serve did not start:\n{log_path.read_text()}")


def stop_server(process: subprocess.Popen, timeout: float = 10) -> None:
    """Stop a served app with its whole process group."""
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=timeout)
