"""Fuzz one served page with random URL states: Unicode, huge numbers, duplicates, HTML/JS, oversized values.

Every state is fetched over HTTP (the page's script runs for each, as for a browser); a sample is opened in
chromium, where an injected script would raise a dialog. Prints the app tracebacks in the server log, blank pages,
script runs, the longest ``/liveness`` stall seen by a probe running throughout, and the server's RSS growth per
abandoned session (100 fetched pages never connected). Run: ``python benchmarks/fuzz_server.py --states 1000``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

from playwright.sync_api import sync_playwright

from page_driving.chromium import CHROMIUM, CHROMIUM_ARGS
from page_driving.server import REPO_ROOT, serve_app, stop_server

PAYLOADS = ("<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "\"'><svg onload=alert(1)>", "²", "٣",
            "true", "-1", "9" * 300, "1e309", "NaN", "{", "[", "null", "\u202e", "\ud800", "😀" * 50, "%00", "")
PART_IDS = ("block.0", "block.1", "block.²", "attention.0", "mlp.99", "final_norm", "lm_head", "<b>", "block.-1")
BROWSER_SAMPLE = 20
ABANDONED_SESSIONS = 100


def random_value(rng: random.Random) -> str:
    """A value of any kind: a payload, a random Unicode string, a huge number or a long repeat."""
    kind = rng.random()
    if kind < 0.4:
        return rng.choice(PAYLOADS)
    if kind < 0.7:
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0xA0, 0x3000), rng.randrange(0x1F300,
                                                                                                        0x1FAFF)]))
                       for _ in range(rng.randrange(1, 40)))
    if kind < 0.85:
        return str(rng.choice([10 ** rng.randrange(1, 40), -rng.randrange(10 ** 6), rng.random() * 1e300]))
    return rng.choice(PAYLOADS[:3]) * rng.randrange(1, 400)


def random_state(rng: random.Random) -> dict[str, str]:
    """A URL query over the page's keys (and one unknown key), each present or not."""
    state = {key: random_value(rng) for key in ("prompt", "model", "bos", "layer", "token") if rng.random() < 0.6}
    if rng.random() < 0.5:
        count = rng.choice([1, 5, 100, 500, 2000])
        state["pinned"] = json.dumps([rng.choice(PART_IDS) for _ in range(count)])
    elif rng.random() < 0.3:
        state["pinned"] = random_value(rng)
    if rng.random() < 0.1:
        state["unknown"] = random_value(rng)
    return state


class LivenessProbe(threading.Thread):
    """Polls ``/liveness`` every 20 ms and keeps the longest answer time of each phase of the benchmark."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.phase, self.longest, self.running = url, "start", {}, True

    def run(self) -> None:
        while self.running:
            started = time.perf_counter()
            try:
                urllib.request.urlopen(self.url, timeout=60).read()
            except OSError:
                return  # the server stopped
            self.longest[self.phase] = max(self.longest.get(self.phase, 0.0), time.perf_counter() - started)
            time.sleep(0.02)


def query(state: dict[str, str]) -> str:
    """The state as a URL query; a lone surrogate becomes bytes that are not UTF-8, as a hostile client sends."""
    return urlencode(state, errors="surrogatepass")


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as refused:
        return refused.code, ""


def rss_mib(pid: int) -> float:
    """The resident memory of the server and its children, in MiB."""
    pids = [pid] + [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return sum(int(next(line.split()[1] for line in Path(f"/proc/{p}/status").read_text().splitlines()
                        if line.startswith("VmRSS"))) for p in pids) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--states", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--serve-options", default="", help="more options for panel serve, as one string "
                                                            "(e.g. \"--unused-session-lifetime 5000\")")
    arguments = parser.parse_args()
    rng = random.Random(arguments.seed)
    log_path = Path("/tmp") / f"fuzz-server-{os.getpid()}.log"
    process, app = serve_app(str(REPO_ROOT / "assets" / "demo-gpt2"), log_path,
                             server_options=tuple(arguments.serve_options.split()))
    probe = LivenessProbe(app.url.rsplit("/", 1)[0] + "/liveness")
    probe.start()
    blank = refused = script_runs = 0
    states = [random_state(rng) for _ in range(arguments.states)]
    try:
        started, probe.phase = time.perf_counter(), "fetching the states"
        for state in states:
            status, body = fetch(f"{app.url}?{query(state)}")
            refused += status != 200
            blank += status == 200 and "Bokeh" not in body
        fetched_seconds = time.perf_counter() - started
        probe.phase = "their sessions expiring"
        time.sleep(20)  # the fetched pages' sessions expire unconnected (15 s)
        probe.phase = "fetching pages to abandon"
        before = rss_mib(process.pid)
        for state in states[:ABANDONED_SESSIONS]:
            fetch(f"{app.url}?{query(state)}")
        after = rss_mib(process.pid)
        probe.phase = "opening pages in chromium"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for state in rng.sample(states, min(BROWSER_SAMPLE, len(states))):
                page = browser.new_page()
                dialogs = []
                page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
                page.goto(f"{app.url}?{query(state)}")
                page.locator(".status-line").filter(has_text="tokens").or_(page.locator(".error-line")).first.wait_for(
                    timeout=60_000)
                page.wait_for_timeout(500)
                script_runs += len(dialogs)
                page.close()
            browser.close()
    finally:
        probe.running = False
        stop_server(process)
    log = app.log_without_closed_tab_reports()
    print(f"states fetched: {len(states)} in {fetched_seconds:.0f} s ({refused} refused by Tornado, such as over-long "
          f"URLs); browser sample: {min(BROWSER_SAMPLE, len(states))}")
    print(f"app tracebacks: {log.count('Traceback')} (target 0)")
    print(f"blank pages: {blank} (target 0)")
    print(f"script runs: {script_runs} (target 0)")
    print(f"longest /liveness stall: {max(probe.longest.values()):.3f} s (target <= 0.2 s); by phase: "
          + ", ".join(f"{phase} {seconds:.3f} s" for phase, seconds in probe.longest.items()))
    print(f"RSS after {ABANDONED_SESSIONS} abandoned sessions: +{after - before:.1f} MiB, "
          f"{(after - before) / ABANDONED_SESSIONS:.2f} MiB each (target <= 1 MiB)")


if __name__ == "__main__":
    main()
