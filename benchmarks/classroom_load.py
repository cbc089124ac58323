"""Classroom load: one ``panel serve viz_app`` on localhost and 30 students, each in their own browser context of one
chromium, clicking Run on their own prompt (32 to 128 tokens) at about the same time.

Prints the 50th and 95th percentiles and the maximum of Run -> updated (the status line shows the session's token
count and its norms figures are drawn for that run), and checks that every session ends showing its own prompt,
tokens and pinned card and nothing of another's, against each model's p95 target at 30 sessions
(``TARGET_P95_SECONDS``). Exits with 1 when a session showed something not its own or the server logged a
traceback.
For reference it first prints the compute floor: the sessions' prompts through the plain forward one by one, in the
page's own compute (precision and eager attention, logits at the last position: ``plain_forward.py``), with every
position's logits, and in float32 eager; and the class's own
floor, its runs captured in the batches the server cuts them into when they all wait together
(``viz_app/run_batches.py``), in this process: the p95 is also printed as a multiple of that, which reads the same
on a machine whose matmuls are faster or slower.

    python benchmarks/classroom_load.py [--model demo-gpt2|gpt2-small|tiny|NAME|PATH] [--sessions 30]
    python benchmarks/classroom_load.py --model HuggingFaceTB/SmolLM2-135M-Instruct
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import numpy as np
from plain_forward import forward_seconds, median_seconds, page_compute
from served_models import MODEL_SHAPES, save_gpt2_shaped, served, tracebacks_in

from model_backend import capture_batch, load_model
from model_backend.model_names import SMOLLM2
from page_driving.classroom import run_classroom, session_plans, token_ids
from page_driving.script_classroom import script_classroom
from viz_app.run_batches import batches

TARGET_P95_SECONDS = {"demo-gpt2": 3.0, "gpt2-small": 6.0, SMOLLM2: 2.5}


def model_source(model: str, scratch: Path) -> tuple[str, Path]:
    """What the server is given (a random model of a named shape saved in ``scratch``, or a name, Hub id or folder
    as it is) and the folder its tokenizer and config are read from."""
    if model in MODEL_SHAPES:
        folder = save_gpt2_shaped(scratch / model, model)
        return str(folder), folder
    return model, load_model(model).folder


def report(model: str, outcomes, class_floor: float) -> bool:
    """Print the latencies against the model's target and the class's batched floor, and every session's problems;
    True when all were isolated."""
    seconds = [outcome.seconds for outcome in outcomes if outcome.seconds is not None]
    if seconds:
        p50, p95 = np.percentile(seconds, [50, 95])
        target = TARGET_P95_SECONDS.get(model)
        verdict = f" (target p95 <= {target:g} s: {'met' if p95 <= target else 'missed'})" if target else ""
        print(f"Run -> updated over {len(seconds)} sessions: p50 {p50:.2f} s, p95 {p95:.2f} s, "
              f"max {max(seconds):.2f} s{verdict}; p95 = {p95 / class_floor:.2f}x the class's batched floor")
    isolated = [outcome for outcome in outcomes if not outcome.problems]
    print(f"isolation: {len(isolated)} of {len(outcomes)} sessions showed only their own prompt, tokens and card")
    for session, outcome in enumerate(outcomes):
        for problem in outcome.problems:
            print(f"  session {session}: {problem}")
    return len(isolated) == len(outcomes)


def print_compute_floor(source: str, folder: Path, plans, repeats: int = 3) -> float:
    """The sessions' prompts through the plain forward one by one (summed medians in the page's compute and in
    float32 eager), and the class's batched floor: the median seconds of capturing them all in the server's batches,
    in the page's compute. Returns the latter."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    token_lists = [token_ids(tokenizer, plan.prompt) for plan in plans]
    page = load_model(source, **page_compute())
    compute, same, every_logit, float32 = forward_seconds(source, token_lists, repeats, page=page)
    print(f"compute floor, the {len(plans)} prompts one by one through the plain forward: {sum(same):.2f} s in "
          f"{compute} (the page's; logits at the last position, as a run reads them); with every position's logits "
          f"{sum(every_logit):.2f} s, and {sum(float32):.2f} s in float32 eager", flush=True)
    cut = [[ids for _, ids in batch] for batch in batches([(None, ids) for ids in token_lists])]
    floor = median_seconds(lambda: [capture_batch(page, batch) for batch in cut], repeats)
    print(f"the class's batched floor, its {len(plans)} runs captured as the server batches them "
          f"({' + '.join(str(len(batch)) for batch in cut)} runs): {floor:.2f} s in {compute}", flush=True)
    return floor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="demo-gpt2", help="demo-gpt2, gpt2-small, tiny, a model name or Hub id "
                                                             f"({SMOLLM2}) or a checkpoint folder")
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--shortest", type=int, default=32, help="tokens of the shortest prompt, BOS included")
    parser.add_argument("--longest", type=int, default=128, help="tokens of the longest prompt, BOS included")
    parser.add_argument("--clients", choices=("script", "chromium"), default="script",
                        help="Bokeh client sessions in threads (the server's load alone), or chromium pages on the "
                             "same cores (their rendering included)")
    parser.add_argument("--serve-options", default="", help="more options for panel serve, as one string: "
                                                            "--serve-options='--num-procs 2'")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        source, folder = model_source(arguments.model, Path(scratch))
        plans = session_plans(folder, arguments.sessions, arguments.shortest, arguments.longest)
        print(f"{arguments.model} ({folder}): {arguments.sessions} sessions of {plans[0].n_tokens} to "
              f"{plans[-1].n_tokens} tokens, panel serve {arguments.serve_options}, "
              f"{arguments.clients} clients", flush=True)
        class_floor = print_compute_floor(source, folder, plans)
        with served(source, Path(scratch) / "server.log", server_options=tuple(arguments.serve_options.split())) as app:
            if arguments.clients == "script":
                outcomes = script_classroom(app.url, plans)
            else:
                outcomes = asyncio.run(run_classroom(app.url, plans))
        tracebacks = tracebacks_in(app)
    print(f"server log: {tracebacks} tracebacks")
    sys.exit(0 if report(arguments.model, outcomes, class_floor) and not tracebacks else 1)


if __name__ == "__main__":
    main()
