"""Command line: ``python -m model_backend export --model NAME --prompt TEXT [--bos] --out FILE.npz`` runs one prompt
and writes every captured value; ``python -m model_backend patch --model NAME --clean TEXT --corrupted TEXT
[--answer TOKEN] [--wrong TOKEN] [--bos] --out FILE.npz`` writes activation patching's grids;
``python -m model_backend generate --model NAME --prompt TEXT [--bos] --max-new-tokens N [--temperature T --top-k K
--top-p P --seed S] [--steer-block B --steer-toward TEXT --steer-away TEXT --steer-alpha A] [--dtype D] --out
FILE.npz`` writes a continuation and its steps; ``python -m model_backend flow --model NAME --prompt TEXT [--bos]
--out FILE.npz`` writes the information-flow shares; ``python -m model_backend prepare NAME`` makes a model ready to
load offline."""

from __future__ import annotations

import argparse
import sys

from transformers.utils import logging as transformers_logging

from .capture import capture_run
from .errors import BackendError
from .export import EXPORT_TOP_K, write_npz, write_patching_npz
from .flow_command import add_flow_arguments, flow
from .generate_command import add_generate_arguments, generate
from .loading import load_model
from .patching import activation_patching

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
    patch = commands.add_parser("patch", help="patch each block's values of a corrupted prompt with a clean one's "
                                              "and write the answer-minus-wrong logit grids to an NPZ file")
    patch.add_argument("--model", required=True, help=MODEL_HELP)
    patch.add_argument("--clean", required=True, help="the clean prompt")
    patch.add_argument("--corrupted", required=True, help="the corrupted prompt, as many tokens as the clean one")
    patch.add_argument("--answer", help="the answer token's text (default: the clean run's top prediction)")
    patch.add_argument("--wrong", help="the wrong token's text (default: the corrupted run's top prediction)")
    patch.add_argument("--bos", action="store_true", help="put the model's BOS token first in both prompts")
    patch.add_argument("--out", required=True, help="the .npz file to write")
    add_generate_arguments(commands, MODEL_HELP)
    add_flow_arguments(commands, MODEL_HELP)
    prepare = commands.add_parser("prepare", help="load a model once (downloading or preparing it), so that it "
                                                  "later loads without network; prints where it is kept")
    prepare.add_argument("model", help=MODEL_HELP)
    return parser.parse_args(argv)


def export(arguments: argparse.Namespace) -> str:
    loaded = load_model(arguments.model)
    run = capture_run(loaded, arguments.prompt, bos=arguments.bos)
    write_npz(loaded, run, arguments.out, k=arguments.top_k)
    return f"wrote {arguments.out}: {run.seq_len} tokens, {run.n_layers} blocks of {run.model_name}"


def patch(arguments: argparse.Namespace) -> str:
    loaded = load_model(arguments.model)
    patching = activation_patching(loaded, arguments.clean, arguments.corrupted, bos=arguments.bos,
                                   answer=arguments.answer, wrong=arguments.wrong)
    write_patching_npz(loaded, patching, arguments.out)
    pair = patching.pair
    return (f"wrote {arguments.out}: {pair.clean.seq_len} tokens, {pair.clean.n_layers} blocks of "
            f"{pair.clean.model_name}; logit[{pair.answer!r}] - logit[{pair.wrong!r}] = {pair.clean_metric:.3f} "
            f"clean, {pair.corrupted_metric:.3f} corrupted")


def prepare(arguments: argparse.Namespace) -> str:
    loaded = load_model(arguments.model, progress=lambda message: print(message, file=sys.stderr, flush=True))
    print(f"{loaded.display_name} ({loaded.origin}) is ready in:", file=sys.stderr)
    return str(loaded.folder)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    transformers_logging.disable_progress_bar()
    try:
        commands = {"export": export, "patch": patch, "generate": generate, "flow": flow, "prepare": prepare}
        print(commands[arguments.command](arguments))
    except (BackendError, OSError, MemoryError) as error:
        print(f"error: {error}".splitlines()[0], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
