"""What only the benchmarks serve: random GPT-2 models of named shapes, prompts of an exact token count, a served
app for a ``with`` block, and the tracebacks in its log. The page-driving steps themselves are in ``page_driving``.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from page_driving.server import ServedApp, serve_app, stop_server
from page_driving.tiny_models import save_tiny_gpt2

MODEL_SHAPES = {"gpt2-small": {"n_layer": 12, "n_embd": 768, "n_head": 12},
                "tiny": {"n_layer": 3, "n_embd": 48, "n_head": 4}}


def save_gpt2_shaped(folder: Path, shape: str) -> Path:
    """A random GPT-2 of a named shape with GPT-2's tokenizer and 1024 positions (random weights cost the same
    compute as trained ones)."""
    return save_tiny_gpt2(folder, n_positions=1024, **MODEL_SHAPES[shape])


def repeated_words(n_tokens: int) -> str:
    """"word word …": with GPT-2's tokenizer, BOS plus this prompt is exactly ``n_tokens`` tokens."""
    return "word" + " word" * (n_tokens - 2)


@contextmanager
def served(models: str, log_path: Path, *, warm: bool = True, app_options: tuple[str, ...] = (),
           server_options: tuple[str, ...] = ()):
    """A ``panel serve viz_app`` on ``models`` for the ``with`` block (``app_options`` such as ``--device cuda`` go to
    the app, ``server_options`` such as ``--num-procs 2`` to panel serve); its whole process group is stopped after."""
    process, app = serve_app(models, log_path, warm=warm, app_options=app_options, server_options=server_options)
    try:
        yield app
    finally:
        stop_server(process, timeout=30)


def tracebacks_in(app: ServedApp) -> int:
    return app.log_without_closed_tab_reports().count("Traceback")
