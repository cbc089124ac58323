"""A classroom on one server: many browser sessions, each with its own prompt and its own pinned card, click Run at
about the same time; each is timed until its page is updated, then checked to show its own run and nothing of
another's. Used by benchmarks/classroom_load.py and tests/test_classroom_isolation.py."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect
from transformers import AutoConfig, AutoTokenizer

from layouts.diagram_parts import part_id
from layouts.style import token_axis_labels
from model_backend.names import full_name
from page_driving.chromium import VIEWPORT, launch_chromium
from page_driving.locators import AXIS_LABELS, NORMS_TAB, PROMPT_BOX
from page_driving.steps import TIMEOUT_MS, run_until_updated, show_tab, type_prompt, wait_until_idle

WORDS = ("the river runs past an old mill where children once played and the miller sang of harvest rain "
         "while lanterns swayed over quiet water").split()
# Per-block parts whose cards read different sets of values, so a card shows which part it belongs to.
PINNABLE_KINDS = (("block", ("layer_input", "layer_output")), ("attention_norm", ("layer_input",)),
                  ("attention", ("attention_output", "attention_probabilities")), ("mlp_norm", ("layer_mid",)),
                  ("mlp", ("mlp_output",)))


@dataclass(frozen=True)
class SessionPlan:
    """What one student does and should then see: the prompt, its position labels, the pinned part and the
    standardized names its card reads."""

    prompt: str
    token_labels: tuple[str, ...]
    pinned: str
    card_names: tuple[str, ...]

    @property
    def n_tokens(self) -> int:
        return len(self.token_labels)


@dataclass
class SessionOutcome:
    """Seconds from Run to the updated page (None if it never came), and what the page showed that was not its own."""

    seconds: float | None
    problems: list[str]


def session_plans(model_dir: Path, n_sessions: int, shortest: int, longest: int) -> list[SessionPlan]:
    """Distinct prompts of ``shortest`` to ``longest`` tokens (BOS included), each session pinning another part."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    n_layers = AutoConfig.from_pretrained(model_dir).num_hidden_layers
    parts = [(part_id(kind, layer), tuple(full_name(name, layer) for name in names))
             for layer in range(n_layers) for kind, names in PINNABLE_KINDS]
    plans = []
    for i in range(n_sessions):
        target = shortest + (longest - shortest) * i // max(1, n_sessions - 1)
        ids = token_ids(tokenizer, prompt := prompt_of_length(tokenizer, i, target))
        tokens = [tokenizer.decode([token_id]) for token_id in ids]
        pinned, card_names = parts[i % len(parts)]
        plans.append(SessionPlan(prompt, tuple(token_axis_labels(tokens).values()), pinned, card_names))
    return plans


def token_ids(tokenizer, prompt: str) -> list[int]:
    """The ids the page runs: BOS, then the prompt's tokens."""
    return [tokenizer.bos_token_id, *tokenizer.encode(prompt, add_special_tokens=False)]


def prompt_of_length(tokenizer, session: int, n_tokens: int) -> str:
    """A prompt that names its session, grown word by word while it stays within ``n_tokens`` tokens."""
    prompt = f"Session {session}:"
    for j in range(4 * n_tokens):
        longer = f"{prompt} {WORDS[(session + j) % len(WORDS)]}"
        if len(token_ids(tokenizer, longer)) > n_tokens:
            break
        prompt = longer
    return prompt


async def run_classroom(url: str, plans: list[SessionPlan]) -> list[SessionOutcome]:
    """The classroom of ``plans`` on the page at ``url``, in a fresh headless chromium."""
    async with async_playwright() as playwright:
        browser = await launch_chromium(playwright, niceness=19)
        try:
            return await classroom_in(browser, url, plans)
        finally:
            await browser.close()


async def classroom_in(browser: Browser, url: str, plans: list[SessionPlan]) -> list[SessionOutcome]:
    """Open one browser context per plan, click every Run together, then check every session."""
    contexts = [await browser.new_context(viewport=VIEWPORT) for _ in plans]
    try:
        errors = [[] for _ in plans]
        pages = await asyncio.gather(*(open_session(context, url, plan, found)
                                       for context, plan, found in zip(contexts, plans, errors)))
        await asyncio.gather(*(type_prompt(page, plan.prompt) for page, plan in zip(pages, plans)))
        seconds = await asyncio.gather(*(run_until_updated(page, NORMS_TAB, plan.n_tokens)
                                         for page, plan in zip(pages, plans)), return_exceptions=True)
        problems = await asyncio.gather(*(isolation_problems(page, plan) for page, plan in zip(pages, plans)))
        await asyncio.gather(*(wait_until_idle(page) for page in pages))
    finally:
        for context in contexts:
            await context.close()
    return [outcome(took, [*found, *seen]) for took, found, seen in zip(seconds, errors, problems)]


def outcome(took: float | Exception, problems: list[str]) -> SessionOutcome:
    if isinstance(took, Exception):
        return SessionOutcome(None, [f"Run never updated the page: {took}", *problems])
    return SessionOutcome(took, problems)


async def open_session(context: BrowserContext, url: str, plan: SessionPlan, errors: list[str]) -> Page:
    """Open the page with the plan's part pinned from the URL, wait for its first run, and show the norms tab;
    browser console errors are collected into ``errors``."""
    page = await context.new_page()
    page.on("console", lambda message: message.type == "error" and errors.append(f"console: {message.text}"))
    page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    await page.goto(f"{url}?{urlencode({'pinned': json.dumps([plan.pinned])})}", timeout=TIMEOUT_MS)
    await expect(page.locator(".status-line")).to_contain_text(" tokens ", timeout=TIMEOUT_MS)
    await wait_until_idle(page)
    await show_tab(page, NORMS_TAB)
    return page


async def isolation_problems(page: Page, plan: SessionPlan) -> list[str]:
    """Everything the session shows that is not its own: prompt box, status line, the norms figure's tokens, and
    (on the block diagram tab) its one pinned card with its run's shapes."""
    problems = []
    if (prompt := await page.locator(PROMPT_BOX).input_value()) != plan.prompt:
        problems.append(f"prompt box shows {prompt!r}")
    if f" {plan.n_tokens} tokens " not in (status := await page.locator(".status-line").inner_text()):
        problems.append(f"status line reads {status!r}")
    if (labels := tuple(await page.evaluate(AXIS_LABELS, "norms_heatmap"))) != plan.token_labels:
        problems.append(f"norms figure shows {len(labels)} tokens, first differing: "
                        f"{next((a, b) for a, b in zip([*labels, None], [*plan.token_labels, None]) if a != b)}")
    await show_tab(page, "Block diagram")
    cards = page.locator(".part-card")
    try:
        await expect(cards.first).to_contain_text(f"({plan.n_tokens}, ", timeout=TIMEOUT_MS)
    except AssertionError as error:
        return [*problems, f"no pinned card shows this run: {error}"]
    if (n_cards := await cards.count()) != 1:
        problems.append(f"{n_cards} pinned cards, expected only {plan.pinned}")
    codes = await cards.locator("code").all_inner_texts()
    shown = {name for name in codes if re.fullmatch(r"layers\.\d+\.\w+", name)}
    if shown != set(plan.card_names):
        problems.append(f"card of {plan.pinned} reads {sorted(shown)}, expected {list(plan.card_names)}")
    return problems
