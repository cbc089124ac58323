"""What sits above every tab: the model's likeliest next tokens, and a warning while the views show a previous run."""

from __future__ import annotations

import html

from model_backend.tokens import visible_token


def next_tokens_panel(next_tokens: list[tuple[str, float]]) -> str:
    """The top next tokens as chips, each with its probability and a bar as long as it (tokens escaped)."""
    if not next_tokens:
        return ""
    chips = "".join(f"<span class='next-token'><code>{html.escape(visible_token(token))}</code> {p:.0%}"
                    f"<span class='next-token-bar' style='width:{max(p * 60, 1):.0f}px'></span></span>"
                    for token, p in next_tokens)
    return f"<div class='next-tokens'><b>Next token:</b> {chips}</div>"


def stale_banner(stale: str, run) -> str:
    """A warning that the views, and the download, still belong to the previous run, and why."""
    if not stale or run is None:
        return ""
    prompt = run.prompt if len(run.prompt) <= 40 else run.prompt[:39] + "…"
    return (f"<p class='stale-run'>⚠ Showing the previous run (“{html.escape(prompt)}”, {run.seq_len} tokens): "
            f"{html.escape(stale)}</p>")
