"""Command line: ``python -m model_backend export --model NAME --prompt TEXT [--bos] --out FILE.npz`` runs one prompt
and writes every captured value; ``python -m model_backend prepare NAME`` makes a model ready to load offline."""

from __future__ import annotations

import argparse
import sys

from transformers.utils import logging as transformers_logging

from .capture import capture_run
from .errors import BackendError
from .export import EXPORT_TOP_K, write_npz
from .loading import load_model

MODEL_HELP = ("a model name (demo-gpt2, HuggingFaceTB/SmolLM2-135M-Instruct, google/gemma-3-270m), a Hub id "
              "(gpt2, ...) or a local folder")


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m model_backend", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="run one prompt and write every captured value to an NPZ file")
    export.add_argument("--model", required=True, help=MODEL_HELP)
    export.add_argument("--prompt", required=True, help="the text to run")
    export.add_argument("--bos", action="store_true", help="put the model's BOS token first")
    export.add_argument("--top-k", type=int, default=EXPORT_TOP_K, help="logit-lens tokens kept per cell")
    export.add_argument("--out", required=True, help="the .npz file to write")
    prepare = commands.add_parser("prepare", help="load a model once (downloading or preparing it), so that it "
                                                  "later loads without network; prints where it is kept")
    prepare.add_argument("model", help=MODEL_HELP)
    return parser.parse_args(argv)


def export(arguments: argparse.Namespace) -> str:
    loaded = load_model(arguments.model)
    run = capture_run(loaded, arguments.prompt, bos=arguments.bos)
    write_npz(loaded, run, arguments.out, k=arguments.top_k)
    return f"wrote {arguments.out}: {run.seq_len} tokens, {run.n_layers} blocks of {run.model_name}"


def prepare(arguments: argparse.Namespace) -> str:
    loaded = load_model(arguments.model, progress=lambda message: print(message, file=sys.stderr, flush=True))
    print(f"{loaded.display_name} ({loaded.origin}) is ready in:", file=sys.stderr)
    return str(loaded.folder)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    transformers_logging.disable_progress_bar()
    try:
        print({"export": export, "prepare": prepare}[arguments.command](arguments))
    except (BackendError, OSError, MemoryError) as error:
        print(f"error: {error}".splitlines()[0], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
