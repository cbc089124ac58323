"""A class served by two server processes (``panel serve --num-procs 2``): sessions reach both processes, and every
session sees only its own run. docs/classroom-scaling.md says when a second process helps."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

from page_driving.classroom import session_plans
from page_driving.script_classroom import script_classroom
from page_driving.server import serve_app, stop_server

N_SESSIONS = 12
SESSION_START = re.compile(r"a page's session starts in server process (\d+)")


def test_two_processes_serve_a_class_each_session_seeing_only_its_own_run(tiny_gpt2_dir, tmp_path):
    process, app = serve_app(str(tiny_gpt2_dir), tmp_path / "server.log", server_options=("--num-procs", "2"))
    try:
        plans = session_plans(tiny_gpt2_dir, N_SESSIONS, shortest=20, longest=60)
        with ThreadPoolExecutor(1) as thread:  # the clients run their own event loops
            outcomes = thread.submit(script_classroom, app.url, plans).result()
    finally:
        stop_server(process, timeout=30)  # the whole group: the parent and both forked servers
    assert [outcome.problems for outcome in outcomes] == [[] for _ in plans]
    serving = SESSION_START.findall(app.log())
    assert len(set(serving)) == 2, f"sessions per process: {sorted(serving)}"
    assert "Traceback" not in app.log_without_closed_tab_reports()
