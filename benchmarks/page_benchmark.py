"""Page benchmark: how long the served page takes to show a run, next to the plain forward pass of the same prompt.

A GPT-2-small-shaped random model (12 x 768, 12 heads, GPT-2's tokenizer, 1024 positions) is served by
``panel serve viz_app`` and driven in chromium. Each figure is the median of --repeats:
- Run click -> the Norms & sinks tab updated (status line and every figure name the new token count, drawn), per
  prompt length ("word word …", BOS included);
- after a run at about the longest length (one token less each repeat, so that no tab already shows that count),
  a click on each other tab -> its figures drawn for that run;
- a first visit to a fresh server: goto -> the page shell (status line shown, noting whether it said it was
  loading), and goto -> the first figure drawn (the block diagram of the default prompt), with and without --warm.
The plain forward is ``model(input_ids, logits_to_keep=1)`` in this process, loaded as the page loads it (its
precision and eager attention, the last position's logits as a run reads them: ``plain_forward.py``), same prompt,
same torch thread count as the server, so the page's overhead reads as a ratio; ``model(input_ids)`` (every
position's logits) and the float32 eager forward are printed beside it for reference.

    python benchmarks/page_benchmark.py [--lengths 32 512] [--repeats 5] [--shape gpt2-small|tiny] [--device cuda]
    python benchmarks/page_benchmark.py --model HuggingFaceTB/SmolLM2-135M-Instruct --lengths 32 512 --tabs-at 128
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import torch
from playwright.async_api import Browser, Page, async_playwright, expect
from served_models import MODEL_SHAPES, repeated_words, save_gpt2_shaped, served, tracebacks_in

from layouts.logit_lens_view import VISIBLE_POSITIONS as LENS_VISIBLE_POSITIONS
from layouts.state import DEFAULT_PROMPT
from plain_forward import forward_seconds

from model_backend import load_model
from model_backend.tokens import encode_prompt
from page_driving.chromium import VIEWPORT, launch_chromium
from page_driving.locators import FIGURES_BY_TAB, FIND_VIEW, NORMS_TAB
from page_driving.steps import (POLL_MS, TIMEOUT_MS, run_until_updated, show_tab, type_prompt, wait_drawn,
                                wait_until_idle)

LENS_TAB = "Logit lens"
SHOW_FIRST_LENS_POSITIONS = f"""n => {{
    const view = ({FIND_VIEW})("logit_lens");
    view.model.x_range.setv({{start: -0.5, end: n - 0.5}});
    view.trigger_ranges_update_event();
}}"""
FIRST_LENS_CELLS_DRAWN = f"""() => {{
    const view = ({FIND_VIEW})("logit_lens");
    const cells = view.model.renderers.map(r => r.data_source).find(s => s.name === "logit_lens_cells").data;
    return cells.position.includes(0) && view.has_finished();
}}"""


async def first_visit(browser: Browser, source: str, logs: Path, warm: bool, n_default: int,
                      app_options: tuple[str, ...]) -> tuple[float, float, str]:
    """Seconds from goto to the page shell and to the first drawn figure on a fresh server, and what the shell's
    status line said."""
    with served(source, logs / f"server-first-visit-{warm}.log", warm=warm, app_options=app_options) as app:
        context = await browser.new_context(viewport=VIEWPORT)
        page = await context.new_page()
        status = page.locator(".status-line")
        started = time.perf_counter()
        await page.goto(app.url, wait_until="commit")
        await status.wait_for(state="visible", timeout=TIMEOUT_MS)
        shell = time.perf_counter() - started
        said = await status.inner_text()
        await expect(status).to_contain_text(f" {n_default} tokens ", timeout=TIMEOUT_MS)
        await wait_drawn(page, "Block diagram")
        figure = time.perf_counter() - started
        await wait_until_idle(page)
        await context.close()
    if tracebacks := tracebacks_in(app):
        print(f"first-visit server ({'--warm' if warm else 'no --warm'}) logged {tracebacks} tracebacks")
    return shell, figure, said


async def first_visits(browser: Browser, source: str, logs: Path, repeats: int, n_default: int,
                       app_options: tuple[str, ...]) -> dict[tuple, list[float]]:
    """Each first-visit measurement ``repeats`` times, each on a fresh server, with and without --warm; prints
    what the shell said first."""
    times, said = defaultdict(list), Counter()
    for _ in range(repeats):
        for warm in (False, True):
            flag = "--warm" if warm else "no --warm"
            shell, figure, status = await first_visit(browser, source, logs, warm, n_default, app_options)
            times[(f"first visit, {flag}: shell shown", n_default)].append(shell)
            times[(f"first visit, {flag}: first figure drawn", n_default)].append(figure)
            said[f"{flag}: {status!r}"] += 1
    for text, count in said.items():
        print(f"first visit, the shell's status line first said ({count} of {repeats}) {text}")
    return times


async def runs_and_tabs(browser: Browser, url: str, lengths: list[int], repeats: int,
                        tabs_at: int) -> dict[tuple, list[float]]:
    """Run -> Norms & sinks updated at each length, and after a run of about ``tabs_at`` tokens, each other tab's
    click -> drawn (the tab's first visit after that run; the first repeat is also its first visit ever)."""
    times = defaultdict(list)
    context = await browser.new_context(viewport=VIEWPORT)
    page = await context.new_page()
    await page.goto(url)
    await expect(page.locator(".status-line")).to_contain_text(" tokens ", timeout=TIMEOUT_MS)
    await wait_until_idle(page)
    await show_tab(page, NORMS_TAB)
    shown = None
    for repeat in range(repeats):
        for n_tokens in lengths:
            if shown == n_tokens:  # the timed run must change the token count that the page shows
                await type_prompt(page, repeated_words(n_tokens - 1))
                await run_until_updated(page, NORMS_TAB, n_tokens - 1)
            await type_prompt(page, repeated_words(n_tokens))
            times[(f"Run -> {NORMS_TAB} drawn", n_tokens)].append(await run_until_updated(page, NORMS_TAB, n_tokens))
            shown = n_tokens
        # A hidden tab still shows the last run it drew: each repeat's tab clicks follow a run of a token count
        # that no tab has drawn yet (the longest length minus the repeat), so "drawn" means drawn for this run.
        n_tokens = tabs_at - repeat - 1
        await type_prompt(page, repeated_words(n_tokens))
        await run_until_updated(page, NORMS_TAB, n_tokens)
        shown = n_tokens
        for tab in FIGURES_BY_TAB:
            if tab != NORMS_TAB:
                drawn = await show_tab(page, tab, n_tokens, whole=False)  # its first rows: streamed views go on
                times[(f"click -> {tab} drawn", tabs_at)].append(drawn)
            if tab == LENS_TAB:
                times[("drag the lens to the first tokens -> drawn", tabs_at)].append(
                    await drag_lens_to_start(page))
            await wait_until_idle(page)
        await show_tab(page, NORMS_TAB, n_tokens)
    await context.close()
    return times


async def drag_lens_to_start(page: Page) -> float:
    """Seconds from showing the lens grid's first positions (as a drag ends: the range moved, then the event a
    pan tool sends) until their cells are drawn; the grid opens on the last positions."""
    started = time.perf_counter()
    await page.evaluate(SHOW_FIRST_LENS_POSITIONS, LENS_VISIBLE_POSITIONS)
    await page.wait_for_function(FIRST_LENS_CELLS_DRAWN, timeout=TIMEOUT_MS, polling=POLL_MS)
    return time.perf_counter() - started


def print_table(times: dict[tuple, list[float]], forward: dict[int, tuple[float, float, float]]) -> None:
    """One row per measurement: its median, the plain forward of the same prompt in the page's compute and their
    ratio, and for reference ``model(input_ids)`` (every position's logits) in it and in float32 eager."""
    print(f"{'measurement':<44} {'tokens':>6} {'page':>8} {'forward':>8} {'page/forward':>13} {'all logits':>11} "
          f"{'float32 fwd':>12}")
    for (label, n_tokens), values in times.items():
        median = statistics.median(values)
        same, every_logit, float32 = forward[n_tokens]
        print(f"{label:<44} {n_tokens:>6} {median:>7.2f}s {same:>7.3f}s {median / same:>12.1f}x {every_logit:>10.3f}s "
              f"{float32:>11.3f}s")


async def measure(source: str, logs: Path, lengths: list[int], repeats: int, tabs_at: int, n_default: int,
                  app_options: tuple[str, ...], first_visit_too: bool) -> dict[tuple, list[float]]:
    async with async_playwright() as playwright:
        browser = await launch_chromium(playwright)
        try:
            with served(source, logs / "server.log", app_options=app_options) as app:
                times = await runs_and_tabs(browser, app.url, lengths, repeats, tabs_at)
            print(f"server log: {tracebacks_in(app)} tracebacks")
            if first_visit_too:
                times.update(await first_visits(browser, source, logs, repeats, n_default, app_options))
        finally:
            await browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 512])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shape", choices=sorted(MODEL_SHAPES), default="gpt2-small")
    parser.add_argument("--model", help="serve this model (a name, Hub id or folder) instead of a random --shape, "
                                        "e.g. HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--tabs-at", type=int, help="token count of the run before the tab clicks (default: the "
                                                    "longest length)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="torch threads here and in the server")
    parser.add_argument("--device", default="cpu", help="the server's and the plain forward's --device (cuda)")
    parser.add_argument("--no-first-visit", action="store_true", help="skip the fresh servers' first visits")
    arguments = parser.parse_args()
    torch.set_num_threads(arguments.threads)
    os.environ["OMP_NUM_THREADS"] = str(arguments.threads)  # the server inherits this process's environment
    tabs_at = arguments.tabs_at or max(arguments.lengths)
    with tempfile.TemporaryDirectory() as scratch:
        source = arguments.model or str(save_gpt2_shaped(Path(scratch) / arguments.shape, arguments.shape))
        lengths = sorted({*arguments.lengths, tabs_at})
        prompts = [DEFAULT_PROMPT, *(repeated_words(n_tokens) for n_tokens in lengths)]
        tokenizer_model = load_model(source)
        token_lists = [encode_prompt(tokenizer_model, prompt, bos=True) for prompt in prompts]
        del tokenizer_model
        if [len(ids) for ids in token_lists[1:]] != lengths:
            raise ValueError("'word word …' prompts did not give the requested token counts")
        compute, *columns = forward_seconds(source, token_lists, arguments.repeats, arguments.device)
        forward = {len(ids): figures for ids, figures in zip(token_lists, zip(*columns))}
        print(f"{arguments.model or arguments.shape + '-shaped random GPT-2'}, torch {torch.__version__}, "
              f"{arguments.threads} threads, median of {arguments.repeats}; the page and the plain forward compute in "
              f"{compute} (eager attention), the forward with the last position's logits (as a run reads them); "
              f"model(input_ids) with every position's logits, and in float32 eager, for reference", flush=True)
        times = asyncio.run(measure(source, Path(scratch), arguments.lengths, arguments.repeats, tabs_at,
                                    len(token_lists[0]), ("--device", arguments.device),
                                    not arguments.no_first_visit))
    print_table(times, forward)


if __name__ == "__main__":
    main()
