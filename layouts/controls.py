"""The sidebar: model picker, prompt, BOS switch, Run, the open block, progress, status, errors, model list and
the NPZ export."""

from __future__ import annotations

import html
import panel as pn

from .state import ExplorerState

SIDEBAR_WIDTH = 330
# Panel's box cuts text at 5,000 characters without a word; past the model's positions the run says so instead.
PROMPT_MAX_CHARACTERS = 200_000


def model_report(outcomes: list[tuple[str, bool, str]]) -> str:
    """Every configured model with where it was found, or why it is not offered."""
    if not outcomes:
        return ""
    items = "".join(f"<li>{'✓' if ok else '✗'} <b>{html.escape(name)}</b>: {html.escape(detail)}</li>"
                    for name, ok, detail in outcomes)
    none_loaded = ("" if any(ok for _, ok, _ in outcomes) else
                   "<p class='no-model'><b>No model could be loaded.</b> Configure one with "
                   "<code>--args --models PATH</code> or <code>RSE_MODELS</code>.</p>")
    return f"{none_loaded}<p>Configured models:</p><ul class='model-report'>{items}</ul>"


def bos_label(bos_token: str) -> str:
    """The BOS switch names the token it prepends (a checkbox label is text, not HTML)."""
    return f"prepend the BOS token {bos_token}" if bos_token else "prepend the BOS token"


def status_line(status: str, busy: str) -> str:
    return f"<p class='status-line'>{html.escape(busy or status)}</p>"


def error_line(message: str) -> str:
    return f"<p class='error-line'>⚠ {html.escape(message)}</p>" if message else ""


def url_note_line(note: str) -> str:
    return f"<p class='url-note'>Link: {html.escape(note)}.</p>" if note else ""


def npz_link_line(link: str, megabytes: float, stale: str) -> str:
    """The prepared NPZ as a link that saves it under its own name (the server streams it from a file), marked
    while the views show a previous run."""
    if not link:
        return ""
    name = html.escape(link.rsplit("/", 1)[-1])
    previous = " <b>(the previous run)</b>" if stale else ""
    return (f"<p class='npz-link'><a href='{html.escape(link)}' download='{name}'>Save {name} "
            f"({megabytes:,.1f} MB)</a>{previous}</p>")


def sidebar_controls(state: ExplorerState) -> list:
    """The sidebar's widgets, all bound to ``state``; Enter in the prompt box runs like the button."""
    prompt = pn.widgets.TextInput.from_param(state.param.prompt, width=SIDEBAR_WIDTH - 20,
                                             max_length=PROMPT_MAX_CHARACTERS, placeholder="Type a prompt, press Enter")
    prompt.param.watch(lambda _event: state.param.trigger("run_requested"), "enter_pressed")
    run = pn.widgets.Button.from_param(state.param.run_requested, color="primary", width=120)
    # A still bar: the animated one kept chromium repainting on a core the pass needs (benchmarks/page_benchmark.py,
    # Run -> Norms drawn; the figures in docs/performance.md).
    progress = pn.indicators.Progress(active=False, width=SIDEBAR_WIDTH - 20, visible=state.param.busy.rx.bool())
    download = pn.widgets.Button.from_param(state.param.npz_requested, color="light", width=SIDEBAR_WIDTH - 20,
                                            disabled=state.param.run.rx.is_(None))
    return [
        pn.widgets.Select.from_param(state.param.model, width=SIDEBAR_WIDTH - 20),
        prompt,
        run,
        pn.widgets.Checkbox.from_param(state.param.bos, label=pn.bind(bos_label, state.param.bos_token)),
        pn.widgets.IntInput.from_param(state.param.layer, width=120),
        progress,
        pn.pane.HTML(pn.bind(status_line, state.param.status, state.param.busy), width=SIDEBAR_WIDTH - 20),
        pn.pane.HTML(pn.bind(error_line, state.param.message), width=SIDEBAR_WIDTH - 20),
        pn.pane.HTML(pn.bind(url_note_line, state.param.url_note), width=SIDEBAR_WIDTH - 20),
        download,
        pn.pane.HTML(pn.bind(npz_link_line, state.param.npz_link, state.param.npz_megabytes, state.param.stale),
                     width=SIDEBAR_WIDTH - 20),
        pn.pane.HTML(pn.bind(model_report, state.param.model_outcomes), width=SIDEBAR_WIDTH - 20),
        pn.widgets.Checkbox.from_param(state.param.presenter, label="presenter mode: large text for a projector"),
    ]
