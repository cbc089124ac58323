"""A classroom server no visitor can stall or blank: URL values checked, prompt limits, publishing under the
document's lock, display names instead of paths, safe CSV cells and safetensors-only loading."""

from __future__ import annotations

import asyncio
import json
import shutil
from urllib.parse import parse_qs

import pandas as pd
import pytest
import torch
from conftest import run_coroutine
from transformers import AutoModelForCausalLM

from layouts.diagram_parts import could_name_a_part
from layouts.downloads import spreadsheet_safe
from layouts.state import ExplorerState
from model_backend import ModelLoadError, PromptError, load_model
from model_backend.tokens import PROMPT_MAX_BYTES, encode_prompt
from viz_app import run_batches
from viz_app.failures import failure_message
from viz_app.model_names import outcome_rows
from viz_app.models import ModelOutcome
from viz_app import prompt_limits
from viz_app.prompt_limits import check_page_token_limit
from viz_app.publishing import Publisher
from viz_app.session import ExplorerSession
from layouts.writing_view import WrittenText
from viz_app.url_state import BRANCHED_MAX, PINNED_MAX, url_choices, url_query


def arguments(**values: str) -> dict[str, list[bytes]]:
    return {key: [value.encode()] for key, value in values.items()}


@pytest.mark.parametrize("key, value", [("layer", "²"), ("token", "²"), ("layer", "true"), ("layer", "-1"),
                                        ("layer", "9" * 400), ("bos", "2"), ("pinned", "{}"), ("pinned", "[[["),
                                        ("prompt", "x" * (PROMPT_MAX_BYTES + 1)), ("temperature", "nan"),
                                        ("steer_alpha", "inf"), ("top_k", "1.5"), ("seed", "x"), ("write", "yes"),
                                        ("max_new_tokens", "9" * 40), ("branches", "6"), ("branches", "0"),
                                        ("branched", "[[0, 1]]"), ("branched", '[["0", 1, 2]]'),
                                        ("branched", "[[0, -1, 2]]"), ("branched", "{}")])
def test_a_bad_url_value_falls_back_to_its_default_with_a_note(key, value):
    choices, notes = url_choices(arguments(**{key: value}))
    assert key not in choices and len(notes) == 1 and "default" in notes[0]
    ExplorerState(**choices)  # whatever is kept is a valid state


def test_url_values_keep_their_types_and_a_prompt_starting_with_a_bracket():
    choices, notes = url_choices(arguments(prompt='{"a": 1} [x]', layer="3", token="12", bos="false",
                                           model="demo-gpt2"))
    assert choices == {"prompt": '{"a": 1} [x]', "layer": 3, "token": 12, "bos": False, "model": "demo-gpt2"}
    assert notes == []


def test_pinned_ids_are_deduplicated_checked_and_capped():
    listed = ["block.²", "block.1", "block.1", "<script>", 5] + [f"attention.{i}" for i in range(500)] * 4
    choices, notes = url_choices(arguments(pinned=json.dumps(listed)))
    assert choices["pinned"][:2] == ["block.1", "attention.0"] and len(choices["pinned"]) == PINNED_MAX
    assert len(set(choices["pinned"])) == PINNED_MAX and "pinned cards" in notes[0]
    assert not could_name_a_part("block.²")


def test_the_url_written_reads_back_as_the_same_choices():
    state = ExplorerState(prompt="² {x} & ?a=b", layer=2, token=5, bos=False, pinned=["block.1"], model="demo",
                          lesson=4)
    query = url_query(state)
    parsed = {key: [value.encode() for value in values] for key, values in parse_qs(query[1:]).items()}
    choices, notes = url_choices(parsed)
    assert notes == [] and choices == {"prompt": state.prompt, "layer": 2, "token": 5, "bos": False,
                                       "pinned": ["block.1"], "model": "demo", "lesson": 4}
    chosen = ExplorerState(target=" London", target_as_written=" London")  # an offered spelling clicked
    parsed = {key: [value.encode() for value in values] for key, values in parse_qs(url_query(chosen)[1:]).items()}
    assert url_choices(parsed)[0]["target_as_written"] == " London"
    typed_over = ExplorerState(target="Paris", target_as_written=" London")  # another word typed since
    assert "target_as_written" not in url_query(typed_over)


def test_a_link_keeps_the_write_settings_that_differ_from_the_defaults_and_reads_them_back():
    state = ExplorerState(max_new_tokens=32, sample=True, temperature=0.7, top_p=0.9, seed=5, steer=True,
                          steer_block=4, steer_toward=" dog", steer_away="cat & <b>", steer_alpha=6.5)
    query = url_query(state)
    assert "top_k" not in query and "write=" not in query  # a default, and nothing written yet
    parsed = {key: [value.encode() for value in values] for key, values in parse_qs(query[1:]).items()}
    choices, notes = url_choices(parsed)
    assert notes == []
    assert {key: choices[key] for key in ("max_new_tokens", "sample", "temperature", "top_p", "seed", "steer",
                                          "steer_block", "steer_toward", "steer_away", "steer_alpha")} == {
        "max_new_tokens": 32, "sample": True, "temperature": 0.7, "top_p": 0.9, "seed": 5, "steer": True,
        "steer_block": 4, "steer_toward": " dog", "steer_away": "cat & <b>", "steer_alpha": 6.5}


def test_a_link_keeps_the_branches_and_the_continued_ones_once_written_and_caps_them():
    written = WrittenText(prompt_tokens=["The"], tokens=[" a"], probabilities=[0.5], alternatives=[[(" a", 0.5)]],
                          n_layers=2, settings="greedy", done=True)
    state = ExplorerState(branches=3, branched=[(0, 2, 318), (3, 0, 11)], writing=written)
    query = url_query(state)
    parsed = {key: [value.encode() for value in values] for key, values in parse_qs(query[1:]).items()}
    choices, notes = url_choices(parsed)
    assert notes == [] and choices["branches"] == 3 and choices["branched"] == [(0, 2, 318), (3, 0, 11)]
    assert "branched" not in url_query(ExplorerState(branched=[(0, 2, 318)]))  # nothing written: nothing to continue
    many = json.dumps([[0, 0, 1]] * (BRANCHED_MAX + 4))
    choices, notes = url_choices(arguments(branched=many))
    assert len(choices["branched"]) == BRANCHED_MAX and f"the first {BRANCHED_MAX}" in notes[0]


def test_a_prompt_over_the_byte_limit_is_refused_before_tokenizing(gpt2, monkeypatch):
    monkeypatch.setattr(gpt2.tokenizer, "encode", lambda *args, **kwargs: pytest.fail("tokenized"))
    with pytest.raises(PromptError, match=f"{PROMPT_MAX_BYTES:,}"):
        encode_prompt(gpt2, "é" * (PROMPT_MAX_BYTES // 2 + 1))


def test_the_page_token_limit_names_itself(gpt2, monkeypatch):
    monkeypatch.setattr(prompt_limits, "PAGE_MAX_TOKENS", 10)
    check_page_token_limit(gpt2, 10)
    with pytest.raises(PromptError, match="at most 10 tokens"):
        check_page_token_limit(gpt2, 11)


def test_a_session_refuses_a_prompt_over_the_page_token_limit_before_its_pass(gpt2, tiny_gpt2_dir, monkeypatch):
    monkeypatch.setattr(prompt_limits, "PAGE_MAX_TOKENS", 4)
    monkeypatch.setattr(run_batches, "capture_batch", lambda *args, **kwargs: pytest.fail("ran"))
    controller = ExplorerSession([str(tiny_gpt2_dir)])
    controller.state.prompt = "one two three four five six"
    controller.loaded = gpt2
    run_coroutine(controller.run_prompt())
    assert "at most 4 tokens" in controller.state.message and controller.state.busy == ""


def test_a_page_load_runs_the_prompt_once(tiny_gpt2_dir, monkeypatch):
    """The selector's new options fire the model watcher, and the start-up switches too: one pass between them."""
    passes = []
    real = run_batches.capture_batch
    monkeypatch.setattr(run_batches, "capture_batch", lambda *args, **kwargs: passes.append(1) or real(*args, **kwargs))
    controller = ExplorerSession([str(tiny_gpt2_dir)])

    async def start_and_settle():
        await controller.start()
        await asyncio.sleep(0.2)  # the model watcher's task, launched by the selector's options, runs here
        async with controller.work.turn:
            pass

    run_coroutine(start_and_settle())
    assert len(passes) == 1 and controller.state.run is not None


class RecordingDocument:
    """A served document's next-tick queue, run when the test says: Bokeh runs each callback holding the lock."""

    session_context = True

    def __init__(self):
        self.queued, self.locked = [], False

    def add_next_tick_callback(self, callback):
        self.queued.append(callback)

    def run_next_ticks(self):
        while self.queued:
            self.locked = True
            self.queued.pop(0)()
            self.locked = False


def test_writes_from_overlapping_jobs_reach_the_page_in_order_under_the_lock():
    """Replays the lost update: a run and a lens read overlap, and the run's busy='' is written last but one.
    Each write lands holding the lock, in order, and the busy line ends empty only when both jobs ended."""
    state, document = ExplorerState(), RecordingDocument()
    publisher = Publisher(state, document)
    seen = []
    state.param.watch(lambda event: seen.append((event.new, document.locked)), "busy")
    run = publisher.showing("Running the prompt…")
    lens = publisher.showing("Reading the logit lens…")
    run.__enter__()
    lens.__enter__()
    assert state.busy == ""  # nothing written outside the lock
    run.__exit__(None, None, None)
    document.run_next_ticks()
    assert state.busy == "Reading the logit lens…"  # the lens job still runs: its line stays
    lens.__exit__(None, None, None)
    document.run_next_ticks()
    assert state.busy == "" and all(locked for _, locked in seen)
    assert [busy for busy, _ in seen] == ["Running the prompt…", "Reading the logit lens…", "", ""][:len(seen)]


def test_the_sidebar_names_models_without_their_folders(tmp_path, gpt2):
    missing = ModelOutcome(str(tmp_path / "secret" / "model"), None, f"not found: no model folder at {tmp_path}")
    rows = outcome_rows([missing, ModelOutcome(gpt2.source, gpt2)])
    assert rows == [("model", False, f"not found: no model folder at …/{tmp_path.name}"),
                    (gpt2.display_name, True, "local folder")]
    assert str(tmp_path) not in str(rows)
    assert str(tmp_path) not in repr(rows)
    assert "/" not in failure_message(FileNotFoundError(f"{tmp_path}/x"))


def test_csv_cells_that_a_spreadsheet_would_run_are_escaped():
    table = pd.DataFrame({"token": ["=cmd|' /C calc'!A0", "+1", "@SUM(A1)", "-2", " Paris"], "value": [1, 2, 3, 4, 5]},
                         index=["=a", "b", "c", "d", "e"])
    safe = spreadsheet_safe(table)
    assert safe["token"].tolist() == ["'=cmd|' /C calc'!A0", "'+1", "'@SUM(A1)", "'-2", " Paris"]
    assert safe.index[0] == "'=a" and safe["value"].tolist() == [1, 2, 3, 4, 5]


def test_a_folder_with_only_pickle_weights_is_refused_with_the_reason(tiny_gpt2_dir, tmp_path):
    folder = tmp_path / "pickled"
    shutil.copytree(tiny_gpt2_dir, folder)
    (folder / "model.safetensors").unlink()
    torch.save(AutoModelForCausalLM.from_pretrained(tiny_gpt2_dir).state_dict(), folder / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="only pickle weights"):
        load_model(str(folder))
