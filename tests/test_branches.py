"""Branches: each is the sampled continuation of its own seed, they part where their tokens first differ, and a branch
continued from an alternative is transformers' ``generate`` from the prompt, the kept tokens and that alternative,
its chosen step carrying the probability a full forward gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_generation import NEW_TOKENS, STEERING, hf_generate, prompt_ids, steered_generate

from model_backend import PromptError
from model_backend.branches import (BranchStart, branch_of, branch_seeds, continue_from, parting_step,
                                    start_branch_from, start_branches)
from model_backend.generation import Generation, WriteSettings, generate_tokens, generation_of
from model_backend.steering import steering_for

SAMPLED = WriteSettings(max_new_tokens=NEW_TOKENS, temperature=1.5, seed=3)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def tiny(request):
    return request.getfixturevalue(request.param)


def written(*texts: list[int]) -> list[Generation]:
    return [Generation(prompt_ids=np.array([0]), generated_ids=np.array(text, dtype=np.int64), steps=[],
                       settings=WriteSettings()) for text in texts]


def test_each_branch_is_its_own_seeds_continuation_and_they_grow_side_by_side(tiny):
    ids = prompt_ids(tiny)
    decoders = start_branches(tiny, ids, SAMPLED, 3)
    while not all(decoder.done for decoder in decoders):
        for decoder in decoders:  # one step each in turn, as the page runs them
            if not decoder.done:
                decoder.step()
    branches = [generation_of(decoder) for decoder in decoders]
    assert [branch.settings.seed for branch in branches] == [3, 4, 5]
    for branch in branches:
        torch.manual_seed(branch.settings.seed)
        expected = hf_generate(tiny, ids, do_sample=True, temperature=1.5, top_k=0, top_p=1.0)
        np.testing.assert_array_equal(branch.generated_ids, expected)
    assert parting_step(branches) is not None  # three seeds at temperature 1.5 over a random model's vocabulary


def test_the_branches_part_at_their_first_differing_token():
    assert parting_step(written([1, 2, 3], [1, 2, 3])) is None
    assert parting_step(written([1, 2, 3], [1, 2, 4], [1, 2, 3])) == 2
    assert parting_step(written([5, 2], [1, 2])) == 0
    assert parting_step(written([1, 2], [1, 2, 3])) == 2  # one stopped early (an EOS token)


def test_a_branch_count_outside_one_to_five_is_refused():
    assert branch_seeds(WriteSettings(seed=7), 2) == [7, 8]
    for count in (0, 6):
        with pytest.raises(PromptError, match="branches must be 1 to 5"):
            branch_seeds(WriteSettings(), count)


def test_a_branch_from_an_alternative_is_generate_from_the_kept_tokens_and_that_alternative(tiny):
    ids = prompt_ids(tiny)
    settings = WriteSettings(max_new_tokens=NEW_TOKENS)
    parent = generate_tokens(tiny, ids, settings)
    step = 2
    alternative = int(parent.steps[step].top_ids[3])
    branch = continue_from(tiny, BranchStart(parent, step, alternative), settings)
    kept = [*parent.generated_ids[:step].tolist(), alternative]
    assert branch.generated_ids[:step + 1].tolist() == kept
    assert len(branch.generated_ids) == NEW_TOKENS and branch.generated_from == len(ids)
    with torch.no_grad():  # transformers' own greedy decoding from the prompt and the kept tokens
        output = tiny.model.generate(torch.tensor([ids + kept]), attention_mask=torch.ones(1, len(ids + kept),
                                     dtype=torch.long), max_new_tokens=NEW_TOKENS - len(kept),
                                     pad_token_id=tiny.config.eos_token_id, do_sample=False)
    np.testing.assert_array_equal(branch.generated_ids[len(kept):], output[0, len(ids + kept):].numpy())
    with torch.no_grad():
        logits = tiny.model(torch.from_numpy(branch.token_ids)[None]).logits[0].float()
    chosen = logits.softmax(-1)[len(ids) - 1 + step]
    np.testing.assert_allclose(branch.steps[step].probability, chosen[alternative], rtol=1e-4)
    np.testing.assert_array_equal(branch.steps[step].top_ids, parent.steps[step].top_ids)


def test_a_branch_of_a_steered_text_is_steered_too(tiny):
    ids = prompt_ids(tiny)
    vector = steering_for(tiny, STEERING)
    settings = WriteSettings(max_new_tokens=NEW_TOKENS)
    parent = generate_tokens(tiny, ids, settings, vector)
    branch = continue_from(tiny, BranchStart(parent, 0, int(parent.steps[0].top_ids[1])), settings)
    assert branch.steering is vector
    shift = STEERING.alpha * torch.from_numpy(vector.vector)
    expected = steered_generate(tiny, ids + branch.generated_ids[:1].tolist(), STEERING.block, shift)
    np.testing.assert_array_equal(branch.generated_ids[1:], expected[:NEW_TOKENS - 1])


def test_an_alternative_that_ends_the_text_or_spends_the_budget_writes_nothing_more(tiny, monkeypatch):
    ids = prompt_ids(tiny)
    settings = WriteSettings(max_new_tokens=3)
    parent = generate_tokens(tiny, ids, settings)
    last = BranchStart(parent, 2, int(parent.steps[2].top_ids[1]))
    assert start_branch_from(tiny, last, settings) is None
    assert branch_of(last, None, settings).generated_ids.tolist() == [*parent.generated_ids[:2].tolist(),
                                                                      last.token_id]
    ending = BranchStart(parent, 0, int(parent.steps[0].top_ids[1]))
    monkeypatch.setattr(tiny.model.generation_config, "eos_token_id", ending.token_id)
    assert continue_from(tiny, ending, settings).generated_ids.tolist() == [ending.token_id]


def test_only_a_listed_alternative_can_start_a_branch(tiny):
    parent = generate_tokens(tiny, prompt_ids(tiny), WriteSettings(max_new_tokens=2))
    unlisted = next(token for token in range(tiny.config.vocab_size) if token not in parent.steps[0].top_ids)
    with pytest.raises(PromptError, match="not among step 1's alternatives"):
        continue_from(tiny, BranchStart(parent, 0, unlisted), WriteSettings(max_new_tokens=2))
