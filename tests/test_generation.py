"""Writing with the model: greedy and sampled decoding token for token as transformers' ``generate``, steering as a
plain torch pre-hook would, each step's probabilities as a full forward gives them, the steered capture's
identities, the commitment blocks, and the ``generate`` command's NPZ."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest
import torch
from family_reference import save_tiny_family_model
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from model_backend import PromptError, capture_token_ids, load_model
from model_backend.__main__ import main
from model_backend.commitment import commitment_blocks
from model_backend.generation import (WriteSettings, capture_generation, check_room, generate_tokens,
                                      processed_scores, start_decoding)
from model_backend.names import RESIDUAL_SUBLAYER_ORDER, full_name
from model_backend.steered_pass import steered
from model_backend.steering import Steering, steering_for, steering_vector
from model_backend.steering_size import steering_report

PROMPT = "The capital of France is"
NEW_TOKENS = 8
FAMILY_CONFIGS = {name: config
                  for path in sorted(Path(__file__).parent.glob("test_family_*.py"))
                  for name, config in importlib.import_module(path.stem).CONFIGS.items()}


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def tiny(request):
    """The suite's tiny GPT-2 and Llama in turn (float32, perturbed norms, non-zero biases)."""
    return request.getfixturevalue(request.param)


def prompt_ids(loaded) -> list[int]:
    return loaded.tokenizer.encode(PROMPT, add_special_tokens=False)


def hf_generate(loaded, ids: list[int], **options) -> np.ndarray:
    """transformers' own ``generate``: the new tokens only."""
    with torch.no_grad():
        output = loaded.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                       max_new_tokens=NEW_TOKENS, pad_token_id=loaded.config.eos_token_id, **options)
    return output[0, len(ids):].numpy()


GREEDY = dict(do_sample=False)


def test_greedy_decoding_is_generate_token_for_token(tiny):
    ids = prompt_ids(tiny)
    generation = generate_tokens(tiny, ids, WriteSettings(max_new_tokens=NEW_TOKENS))
    np.testing.assert_array_equal(generation.generated_ids, hf_generate(tiny, ids, **GREEDY))
    np.testing.assert_array_equal(generation.token_ids[:len(ids)], ids)


@pytest.mark.parametrize("family_name", FAMILY_CONFIGS)
def test_greedy_decoding_is_generate_in_every_family(tmp_path, family_name):
    loaded = load_model(str(save_tiny_family_model(tmp_path, FAMILY_CONFIGS[family_name])))
    ids = prompt_ids(loaded)  # longer than Gemma's 4-token sliding window
    generation = generate_tokens(loaded, ids, WriteSettings(max_new_tokens=NEW_TOKENS))
    np.testing.assert_array_equal(generation.generated_ids, hf_generate(loaded, ids, **GREEDY))


def test_bfloat16_matmuls_decode_as_generate_does_in_them(tiny_llama_dir):
    """In the page's bfloat16-matmul mode each step runs in the model's compute, as ``generate`` run in it does."""
    loaded = load_model(str(tiny_llama_dir), dtype="bfloat16-matmuls")
    ids = prompt_ids(loaded)
    generation = generate_tokens(loaded, ids, WriteSettings(max_new_tokens=NEW_TOKENS))
    with loaded.computing():
        expected = hf_generate(loaded, ids, **GREEDY)
    np.testing.assert_array_equal(generation.generated_ids, expected)


def test_each_step_gives_the_models_own_probabilities(tiny):
    """A step's probabilities are the softmax of the logits a full forward of the prompt and the tokens written
    before it gives (the cached pass rounds its sums in another order: float32 tolerance)."""
    ids = prompt_ids(tiny)
    generation = generate_tokens(tiny, ids, WriteSettings(max_new_tokens=NEW_TOKENS, temperature=0.7, seed=5))
    with torch.no_grad():
        logits = tiny.model(torch.from_numpy(generation.token_ids)[None]).logits[0].float()
    probabilities = logits.softmax(-1)[len(ids) - 1 : -1].numpy()  # each row predicts the next position
    for step, row in zip(generation.steps, probabilities):
        np.testing.assert_allclose(step.probability, row[step.token_id], rtol=1e-4)
        np.testing.assert_array_equal(step.top_ids, np.argsort(-row, kind="stable")[:5])
        np.testing.assert_allclose(step.top_probs, row[step.top_ids], rtol=1e-4)


SAMPLINGS = [dict(temperature=0.8, top_k=40, top_p=0.9), dict(temperature=1.0), dict(temperature=0.3, top_p=0.8),
             dict(temperature=1.5, top_k=3)]


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_sampling_is_generate_seeded_alike(tiny, sampling):
    """transformers' sampling draws from torch's global generator: seeded with the same seed, it draws what the
    decoder's own generator does, through the same warpers."""
    ids = prompt_ids(tiny)
    generation = generate_tokens(tiny, ids, WriteSettings(max_new_tokens=NEW_TOKENS, seed=11, **sampling))
    torch.manual_seed(11)
    expected = hf_generate(tiny, ids, do_sample=True, **{"top_k": 0, "top_p": 1.0, **sampling})
    np.testing.assert_array_equal(generation.generated_ids, expected)


def test_one_seed_replays_one_continuation_within_top_k_and_top_p(tiny):
    ids = prompt_ids(tiny)
    settings = WriteSettings(max_new_tokens=NEW_TOKENS, temperature=0.3, top_k=4, top_p=0.6, seed=7)
    first, again = (generate_tokens(tiny, ids, settings) for _ in range(2))
    np.testing.assert_array_equal(first.generated_ids, again.generated_ids)
    other = generate_tokens(tiny, ids, WriteSettings(max_new_tokens=NEW_TOKENS, temperature=2.0, seed=8))
    assert not np.array_equal(first.generated_ids, other.generated_ids)
    with torch.no_grad():
        logits = tiny.model(torch.from_numpy(first.token_ids)[None]).logits[0, len(ids) - 1 : -1].float()
    for step, row in zip(first.steps, logits):
        assert step.token_id in step.top_ids[:4]
        kept = processed_scores(row[None], settings)[0].isfinite()
        assert kept[step.token_id] and 1 <= int(kept.sum()) <= 4


def test_warpers_match_transformers_on_peaked_logits():
    """Temperature, then top-k, then top-p, as transformers' warpers chain them, ties and edges included."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 200, generator=generator) * 4
    logits[0, :3] = 9.0  # a three-way tie at the top
    for options in [dict(temperature=0.5, top_k=2), dict(temperature=2.0, top_p=0.3), dict(temperature=1.0, top_p=1.0),
                    dict(temperature=0.7, top_k=10, top_p=0.5), dict(temperature=1.0, top_p=1e-6)]:
        settings = WriteSettings(**options)
        expected = logits
        for warper in [TemperatureLogitsWarper(settings.temperature),
                       settings.top_k and TopKLogitsWarper(settings.top_k),
                       settings.top_p and settings.top_p < 1 and TopPLogitsWarper(settings.top_p)]:
            expected = warper(None, expected) if warper else expected
        torch.testing.assert_close(processed_scores(logits, settings), expected, rtol=0, atol=0)


def test_decoder_runs_one_pass_per_step_and_stops(tiny):
    ids = prompt_ids(tiny)
    decoder = start_decoding(tiny, ids, WriteSettings(max_new_tokens=3))
    assert decoder.cache is None and not decoder.done
    lengths = []
    for _ in range(3):
        decoder.step()
        lengths.append(decoder.cache.get_seq_length())
    assert lengths == [len(ids), len(ids) + 1, len(ids) + 2] and decoder.done
    with pytest.raises(RuntimeError, match="done"):
        decoder.step()


def test_an_eos_token_ends_the_writing(tiny, monkeypatch):
    """Where the model writes its EOS token the decoder stops, as ``generate`` does."""
    ids = prompt_ids(tiny)
    plain = generate_tokens(tiny, ids, WriteSettings(max_new_tokens=NEW_TOKENS))
    eos = int(plain.generated_ids[-1])
    monkeypatch.setattr(tiny.model.generation_config, "eos_token_id", eos)
    stopped = generate_tokens(tiny, ids, WriteSettings(max_new_tokens=NEW_TOKENS))
    first_eos = plain.generated_ids.tolist().index(eos)
    np.testing.assert_array_equal(stopped.generated_ids, plain.generated_ids[: first_eos + 1])
    np.testing.assert_array_equal(stopped.generated_ids, hf_generate(tiny, ids, **GREEDY))


def blocks_of(loaded):
    """The blocks, found without the project's family map."""
    return loaded.model.transformer.h if loaded.family.name == "GPT-2" else loaded.model.model.layers


def steered_generate(loaded, ids, block: int, shift: torch.Tensor) -> np.ndarray:
    """``generate`` with a plain torch pre-hook adding ``shift`` to the block's input at every position."""
    def add(_module, args, kwargs):
        if args:
            return (args[0] + shift, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": kwargs["hidden_states"] + shift}
    handle = blocks_of(loaded)[block].register_forward_pre_hook(add, with_kwargs=True)
    try:
        return hf_generate(loaded, ids, **GREEDY)
    finally:
        handle.remove()


BLOCK, ALPHA = 1, 8.0
STEERING = Steering(block=BLOCK, toward=" Paris", away=" London", alpha=ALPHA)


def test_steered_greedy_is_generate_with_a_plain_pre_hook(tiny):
    ids = prompt_ids(tiny)
    vector = steering_for(tiny, STEERING)
    generation = generate_tokens(tiny, ids, WriteSettings(max_new_tokens=NEW_TOKENS), vector)
    expected = steered_generate(tiny, ids, BLOCK, ALPHA * torch.from_numpy(vector.vector))
    np.testing.assert_array_equal(generation.generated_ids, expected)
    plain = generate_tokens(tiny, ids, WriteSettings(max_new_tokens=NEW_TOKENS))
    assert not np.array_equal(generation.generated_ids, plain.generated_ids)
    assert not blocks_of(tiny)[BLOCK]._forward_pre_hooks  # no hook outlives a step


def test_alpha_zero_steers_nothing(tiny):
    ids = prompt_ids(tiny)
    settings = WriteSettings(max_new_tokens=NEW_TOKENS)
    zero = steering_for(tiny, Steering(block=BLOCK, toward=" Paris", away=" London", alpha=0.0))
    steered_run, plain = generate_tokens(tiny, ids, settings, zero), generate_tokens(tiny, ids, settings)
    np.testing.assert_array_equal(steered_run.generated_ids, plain.generated_ids)
    assert [s.probability for s in steered_run.steps] == [s.probability for s in plain.steps]


def test_the_vector_is_the_difference_of_the_two_texts_block_inputs(tiny):
    vector = steering_vector(tiny, STEERING, bos=True)
    name = full_name("layer_input", BLOCK)
    toward, away = (capture_token_ids(tiny, [tiny.tokenizer.bos_token_id, *tiny.tokenizer.encode(text)])[name][-1]
                    for text in (" Paris", " London"))
    np.testing.assert_allclose(vector, toward - away, rtol=1e-5, atol=1e-6)
    made = steering_for(tiny, STEERING, bos=True)
    assert made.norm == pytest.approx(float(np.linalg.norm(vector)), rel=1e-6)
    report = steering_report(capture_token_ids(tiny, prompt_ids(tiny)), made)
    assert report.vector_norm == pytest.approx(ALPHA * made.norm) and report.ratio > 0


def test_steering_acts_only_in_its_own_thread_and_context(tiny):
    """Another thread's pass through the same model, while this thread is steered, is not."""
    from concurrent.futures import ThreadPoolExecutor

    ids = torch.tensor([prompt_ids(tiny)])
    with torch.no_grad():
        plain = tiny.model(ids).logits
        with steered(tiny, steering_for(tiny, STEERING)), ThreadPoolExecutor(1) as other:
            elsewhere = other.submit(lambda: tiny.model(ids).logits).result()
            here = tiny.model(ids).logits
        after = tiny.model(ids).logits
    torch.testing.assert_close(elsewhere, plain, rtol=0, atol=0)
    torch.testing.assert_close(after, plain, rtol=0, atol=0)
    assert not torch.allclose(here, plain)


def test_the_steered_capture_is_the_steered_run_with_exact_identities(tiny):
    ids = prompt_ids(tiny)
    vector = steering_for(tiny, STEERING)
    generation = generate_tokens(tiny, ids, WriteSettings(max_new_tokens=NEW_TOKENS), vector)
    run = capture_generation(tiny, generation, prompt=PROMPT)
    assert run.steering is vector and run.generated_from == len(ids)
    for layer in range(tiny.n_layers):
        values = {name: run[full_name(name, layer)] for name in RESIDUAL_SUBLAYER_ORDER}
        np.testing.assert_array_equal(values["layer_input"] + values["attention_output"], values["layer_mid"])
        np.testing.assert_array_equal(values["layer_mid"] + values["mlp_output"], values["layer_output"])
    shift = vector.shift()
    np.testing.assert_array_equal(run[full_name("layer_input", BLOCK)],
                                  run[full_name("layer_output", BLOCK - 1)] + shift)
    plain = capture_token_ids(tiny, generation.token_ids.tolist())
    assert plain.steering is None and plain.generated_from is None
    np.testing.assert_allclose(run[full_name("layer_input", BLOCK)] - plain[full_name("layer_input", BLOCK)],
                               np.broadcast_to(shift, (run.seq_len, shift.size)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run[full_name("layer_output", BLOCK - 1)],
                               plain[full_name("layer_output", BLOCK - 1)], rtol=1e-5, atol=1e-6)
    # the steered capture's readout chose every written token, as the steered decoding did
    np.testing.assert_array_equal(run.logits[len(ids) - 1 : -1].argmax(-1), generation.generated_ids)


def independent_commitment(loaded, run, generated_from: int) -> list[int]:
    """The first block before the last whose output, through the final norm and lm_head, ranks the next token
    first at the position before, from the run's arrays and the model's two modules."""
    blocks = []
    with torch.no_grad():
        for position in range(generated_from, run.seq_len):
            found = -1
            for layer in range(loaded.n_layers - 1):
                stream = torch.from_numpy(run[f"layers.{layer}.layer_output"][position - 1])
                logits = loaded.model.lm_head(final_norm(loaded)(stream))
                if int(logits.argmax()) == run.token_ids[position]:
                    found = layer
                    break
            blocks.append(found)
    return blocks


def final_norm(loaded):
    return loaded.model.transformer.ln_f if loaded.family.name == "GPT-2" else loaded.model.model.norm


def test_commitment_blocks_match_an_independent_lens(tiny):
    ids = prompt_ids(tiny)
    generation = generate_tokens(tiny, ids, WriteSettings(max_new_tokens=NEW_TOKENS))
    token_ids = generation.token_ids.tolist()
    with torch.no_grad():  # one more token that block 0 already ranks first, so that 0 is among the answers
        first_block = capture_token_ids(tiny, token_ids)["layers.0.layer_output"][-1]
        token_ids.append(int(tiny.model.lm_head(final_norm(tiny)(torch.from_numpy(first_block))).argmax()))
    run = capture_token_ids(tiny, token_ids, generated_from=len(ids))
    blocks = commitment_blocks(tiny, run, len(ids))
    assert blocks.dtype == np.int64 and len(blocks) == NEW_TOKENS + 1 and blocks[-1] == 0
    assert blocks.tolist() == independent_commitment(tiny, run, len(ids))


BAD_SETTINGS = [
    (dict(max_new_tokens=0), "max_new_tokens must be a whole number of at least 1"),
    (dict(temperature=0.0), "temperature must be a finite number above 0"),
    (dict(temperature=-1.0), "temperature must be a finite number above 0"),
    (dict(temperature=float("nan")), "temperature must be a finite number above 0"),
    (dict(temperature=float("inf")), "temperature must be a finite number above 0"),
    (dict(top_k=0), "top_k must be a whole number of at least 1"),
    (dict(top_p=0.0), r"top_p must be a number in \(0, 1\]"),
    (dict(top_p=1.5), r"top_p must be a number in \(0, 1\]"),
]


@pytest.mark.parametrize("options, message", BAD_SETTINGS)
def test_bad_settings_are_refused_saying_why(options, message):
    with pytest.raises(PromptError, match=message):
        WriteSettings(**options)


def test_bad_steering_and_too_many_tokens_are_refused(gpt2):
    with pytest.raises(PromptError, match="toward text is empty"):
        Steering(block=0, toward=" ", away="x", alpha=1.0)
    with pytest.raises(PromptError, match="away text is empty"):
        Steering(block=0, toward="x", away="", alpha=1.0)
    with pytest.raises(PromptError, match="alpha must be a finite number"):
        Steering(block=0, toward="x", away="y", alpha=float("nan"))
    with pytest.raises(PromptError, match=r"block must be one of 0..2"):
        steering_for(gpt2, Steering(block=3, toward="x", away="y", alpha=1.0))
    with pytest.raises(PromptError, match="reads at most 64 positions: ask for at most 4 new tokens"):
        check_room(gpt2, 60, 5)
    check_room(gpt2, 60, 4)
    with pytest.raises(PromptError, match="reads at most 64 positions"):
        generate_tokens(gpt2, list(range(60)), WriteSettings(max_new_tokens=16))


def test_the_command_writes_the_continuation_and_its_steps(tiny_gpt2_dir, gpt2, tmp_path, capsys):
    out = tmp_path / "plain.npz"
    assert main(["generate", "--model", str(tiny_gpt2_dir), "--prompt", PROMPT, "--max-new-tokens",
                 str(NEW_TOKENS), "--out", str(out)]) == 0
    assert "8 new tokens" in capsys.readouterr().out
    with np.load(out, allow_pickle=False) as arrays:
        ids = prompt_ids(gpt2)
        np.testing.assert_array_equal(arrays["generated_ids"], hf_generate(gpt2, ids, **GREEDY))
        np.testing.assert_array_equal(arrays["prompt_ids"], ids)
        np.testing.assert_array_equal(arrays["token_ids"], np.concatenate([ids, arrays["generated_ids"]]))
        assert arrays["step_probabilities"].shape == (NEW_TOKENS,)
        assert arrays["step_top_ids"].shape == arrays["step_top_probs"].shape == (NEW_TOKENS, 5)
        assert np.isnan(arrays["temperature"]) and arrays["top_k"] == 0 and arrays["top_p"] == 1.0
        assert arrays["max_new_tokens"] == NEW_TOKENS and arrays["seed"] == 0
        assert not any(key.startswith("steering.") for key in arrays.files)
    steered_out = tmp_path / "steered.npz"
    assert main(["generate", "--model", str(tiny_gpt2_dir), "--prompt", PROMPT, "--bos", "--max-new-tokens", "4",
                 "--temperature", "0.9", "--top-k", "20", "--top-p", "0.95", "--seed", "3", "--steer-block", "1",
                 "--steer-toward", " Paris", "--steer-away", " London", "--steer-alpha", "8",
                 "--out", str(steered_out)]) == 0
    vector = steering_for(gpt2, STEERING, bos=True)
    expected = generate_tokens(gpt2, [gpt2.tokenizer.bos_token_id, *prompt_ids(gpt2)],
                               WriteSettings(max_new_tokens=4, temperature=0.9, top_k=20, top_p=0.95, seed=3), vector)
    with np.load(steered_out, allow_pickle=False) as arrays:
        np.testing.assert_array_equal(arrays["generated_ids"], expected.generated_ids)
        np.testing.assert_array_equal(arrays["steering.vector"], vector.vector)
        assert (arrays["steering.block"], arrays["steering.alpha"]) == (1, 8.0)
        assert (str(arrays["steering.toward"]), str(arrays["steering.away"])) == (" Paris", " London")
        assert (arrays["temperature"], arrays["top_k"], arrays["top_p"], arrays["seed"]) == (0.9, 20, 0.95, 3)
    assert main(["generate", "--model", str(tiny_gpt2_dir), "--prompt", PROMPT, "--max-new-tokens", "2",
                 "--steer-block", "1", "--out", str(tmp_path / "x.npz")]) == 2
    assert "missing --steer-toward, --steer-away, --steer-alpha" in capsys.readouterr().err
