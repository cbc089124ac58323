"""200 seeded random Unicode prompts through the backend: each is refused with a clear PromptError or runs, and a
run's tokens, identities and analyses hold; no other exception."""

from __future__ import annotations

import random
import re
import unicodedata

import numpy as np
import pytest
import torch

from model_backend import PromptError, capture_run, detect_sinks
from model_backend.lens import logit_lens
from model_backend.tokens import HIDDEN_CATEGORIES, token_strings, visible_token

SEED = 7
N_PROMPTS = 200
ZWJ_SEQUENCES = ("👩\u200d👩\u200d👧\u200d👦", "🏳\ufe0f\u200d🌈", "👨🏽\u200d💻", "🧑\u200d🤝\u200d🧑")
CODE_POINTS = {
    "ascii": [(0x20, 0x7E)],
    "controls": [(0x00, 0x1F), (0x7F, 0x9F)],  # \x00, \r, \n, escape, the C1 controls
    "combining marks": [(0x0300, 0x036F), (0x20D0, 0x20FF)],
    "right to left": [(0x200E, 0x200F), (0x202A, 0x202E), (0x2066, 0x2069), (0x05D0, 0x05EA), (0x0627, 0x064A)],
    "emoji": [(0x1F300, 0x1F64F), (0x1F900, 0x1F9FF), (0x1F3FB, 0x1F3FF)],
    "cjk": [(0x4E00, 0x9FFF), (0x3000, 0x303F)],
    "private use": [(0xE000, 0xF8FF), (0xF0000, 0xFFFFD)],
    "lone surrogates": [(0xD800, 0xDFFF)],
    "unicode whitespace": [(0x2000, 0x200A), (0x2028, 0x2029), (0x3000, 0x3000), (0xA0, 0xA0)],
}
ORDINARY_KINDS = [kind for kind in CODE_POINTS if kind != "lone surrogates"]


def random_character(rng: random.Random, kind: str) -> str:
    if kind == "emoji" and rng.random() < 0.2:
        return rng.choice(ZWJ_SEQUENCES)
    low, high = rng.choice(CODE_POINTS[kind])
    return chr(rng.randint(low, high))


def random_prompt(rng: random.Random) -> str:
    """Mostly short mixes of two or three kinds (which fit the tiny model's 64 positions); some long runs of one
    character, some empty, some with a lone surrogate."""
    shape = rng.choices(["mix", "long run", "long mix", "empty", "with a surrogate"], weights=[70, 8, 8, 2, 12])[0]
    if shape == "empty":
        return ""
    if shape == "long run":
        return random_character(rng, rng.choice(ORDINARY_KINDS)) * rng.randint(200, 2000)
    kinds = rng.sample(ORDINARY_KINDS, rng.randint(1, 3))
    length = 1000 if shape == "long mix" else rng.randint(1, 24)
    characters = [random_character(rng, rng.choice(kinds)) for _ in range(length)]
    if shape == "with a surrogate":
        characters.insert(rng.randint(0, length), random_character(rng, "lone surrogates"))
    return "".join(characters)


def make_cases() -> list[tuple[str, bool]]:
    rng = random.Random(SEED)
    return [(random_prompt(rng), rng.random() < 0.5) for _ in range(N_PROMPTS)]


def expected_refusal(loaded, prompt: str, bos: bool) -> str | None:
    """What a refusal of this prompt must say, or None when it must run."""
    if not prompt:
        return "the prompt is empty"
    if prompt.isspace():
        return "the prompt is only whitespace"
    first_surrogate = next((i for i, c in enumerate(prompt) if 0xD800 <= ord(c) <= 0xDFFF), None)
    if first_surrogate is not None:
        return f"U+{ord(prompt[first_surrogate]):04X}, at character {first_surrogate + 1} of {len(prompt)}"
    n_tokens = len(loaded.tokenizer.encode(prompt, add_special_tokens=False)) + bos
    if n_tokens > loaded.max_positions:
        return f"the prompt is {n_tokens} tokens long"
    return None


def assert_shown_as_text(strings) -> None:
    """Every label is a non-empty str that hides no character and encodes as UTF-8 (what the page sends)."""
    for text in strings:
        assert isinstance(text, str)
        visible = visible_token(text)
        assert visible and not any(unicodedata.category(c) in HIDDEN_CATEGORIES for c in visible), repr(visible)
        visible.encode("utf-8")


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The tiny model's matrices are too small to split: on a busy two-core machine a second thread made the
    200 passes three times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_cases_cover_every_outcome(gpt2):
    outcomes = [expected_refusal(gpt2, prompt, bos) for prompt, bos in make_cases()]
    assert sum(outcome is None for outcome in outcomes) >= 100
    for refusal in ("empty", "whitespace", "U+D", "tokens long"):
        assert any(outcome and refusal in outcome for outcome in outcomes), refusal


@pytest.mark.parametrize("prompt, bos", make_cases(), ids=[f"prompt{i}" for i in range(N_PROMPTS)])
def test_a_random_prompt_is_refused_clearly_or_runs(gpt2, prompt, bos):
    refusal = expected_refusal(gpt2, prompt, bos)
    if refusal is not None:
        with pytest.raises(PromptError, match=re.escape(refusal)):
            capture_run(gpt2, prompt, bos=bos)
        return
    run = capture_run(gpt2, prompt, bos=bos)
    assert gpt2.tokenizer.decode(run.token_ids[bos:]) == prompt  # the model read the prompt unaltered
    assert len(run.tokens) == run.seq_len
    assert_shown_as_text(run.tokens)
    for layer in range(run.n_layers):
        values = {name: run[f"layers.{layer}.{name}"] for name in ("layer_input", "attention_output", "layer_mid",
                                                                    "mlp_output", "layer_output")}
        np.testing.assert_array_equal(values["layer_input"] + values["attention_output"], values["layer_mid"])
        np.testing.assert_array_equal(values["layer_mid"] + values["mlp_output"], values["layer_output"])
    assert all(0 <= sink.position < run.seq_len for sink in detect_sinks(run).sinks)
    lens = logit_lens(gpt2, run, k=3)
    assert_shown_as_text(token_strings(gpt2, lens.top_ids.ravel().tolist()))
