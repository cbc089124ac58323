"""The classroom command of docs/classroom.md: a websocket from a foreign Origin is refused, the documented Origin
accepted."""

from __future__ import annotations

import os
import re
import shlex
import signal

import pytest
from conftest import run_coroutine
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from page_driving.server import REPO_ROOT, free_port, serve_app

CLASSROOM_DOC = REPO_ROOT / "docs" / "classroom.md"


def documented_lan_options() -> dict[str, str]:
    """The options of the documented classroom command, each with its value ("" for a flag)."""
    command = re.search(r"```bash\n(panel serve viz_app --address.*?)```", CLASSROOM_DOC.read_text(),
                        re.DOTALL).group(1)
    words = shlex.split(command.replace("\\\n", " "))[3:]
    return {word: "" if following.startswith("--") else following
            for word, following in zip(words, [*words[1:], "--"]) if word.startswith("--")}


def websocket_status(url: str, origin: str) -> int:
    """The HTTP status the server answers a websocket upgrade with, sent from ``origin``."""
    async def connect() -> int:
        try:
            connection = await websocket_connect(HTTPRequest(url, headers={"Origin": origin}))
        except HTTPClientError as refused:
            return refused.code
        connection.close()
        return 101
    return run_coroutine(connect())


@pytest.fixture(scope="module")
def lan_server(tmp_path_factory):
    """The documented command on 127.0.0.1 with the tiny demo model, basic auth left out (checked apart below)."""
    documented = documented_lan_options()
    port = free_port()
    assert {"--address", "--allow-websocket-origin", "--basic-auth", "--websocket-max-message-size"} <= set(documented)
    host = f"127.0.0.1:{port}"
    served = ["--address", "127.0.0.1", "--allow-websocket-origin", host,
              "--websocket-max-message-size", documented["--websocket-max-message-size"]]
    process, app = serve_app(str(REPO_ROOT / "assets" / "demo-gpt2"), tmp_path_factory.mktemp("lan") / "server.log",
                             warm=False, server_options=tuple(served), port=port)
    yield host
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=10)


def test_a_foreign_origin_is_refused_and_the_documented_one_accepted(lan_server):
    url = f"ws://{lan_server}/viz_app/ws"
    assert websocket_status(url, "http://evil.example") == 403
    assert websocket_status(url, f"http://{lan_server}") == 101


def test_the_documented_command_asks_for_a_password_file(tmp_path):
    assert "--basic-auth" in documented_lan_options() and "--num-procs" in CLASSROOM_DOC.read_text()
