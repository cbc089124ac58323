"""The generic check behind every family's test: a tiny random-init checkpoint of the family, loaded through the real
loading code (and so its load probe), against an independent reference computed from transformers' own modules.

A family's test supplies the config and ``reference_block(block, x, call)``: the block's equations written out with
its transformers submodules (``call`` holds the keyword arguments transformers passed the block: positions, mask).
It returns the block's values by their standardized names; every value the family defines must be among them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from model_backend import capture_run, load_model
from model_backend.names import full_name, parse_full_name
from page_driving.tiny_models import GPT2_TOKENIZER, randomize_norms_and_biases

PROMPT = "The capital of France is Paris, and the capital of Italy is"
TINY_SHAPE = dict(hidden_size=48, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                  max_position_embeddings=64, vocab_size=50257, bos_token_id=50256, eos_token_id=50256,
                  pad_token_id=50256, tie_word_embeddings=False)


def save_tiny_family_model(folder: Path, config, *, seed: int = 3) -> Path:
    """A random-init checkpoint of ``config`` with every norm gain away from 1 and every bias away from 0."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    randomize_norms_and_biases(model, seed=seed)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(GPT2_TOKENIZER).save_pretrained(folder)
    return folder


def reference_values(model, blocks, token_ids: torch.Tensor, reference_block) -> dict[str, np.ndarray]:
    """Every value of one pass by the reference: transformers' hidden states and logits, the embedding module's
    output, and each block's values recomputed from its input with its own submodules."""
    calls = {}

    def keep_call(index):
        def keep(_module, args, kwargs):
            calls[index] = {key: value for key, value in kwargs.items() if key != "hidden_states"}
        return keep

    handles = [block.register_forward_pre_hook(keep_call(i), with_kwargs=True) for i, block in enumerate(blocks)]
    try:
        with torch.no_grad():
            output = model(token_ids, output_hidden_states=True, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    hidden = output.hidden_states
    values = {"final_norm_output": hidden[-1][0], "logits": output.logits[0],
              "token_embeddings": model.get_input_embeddings()(token_ids)[0]}
    with torch.no_grad():
        for layer, block in enumerate(blocks):
            x = hidden[layer]
            values[full_name("layer_input", layer)] = x[0]
            for name, value in reference_block(block, x, calls[layer]).items():
                values[full_name(name, layer)] = value[0]
    return {name: value.detach().numpy() for name, value in values.items()}


def check_against_reference(folder: Path, family_name: str, blocks_of, reference_block):
    """Load the checkpoint (the load probe runs), capture a prompt, and compare every value the family defines
    with the reference to 1e-5; the block outputs must also match transformers' next hidden state. Returns the
    loaded model and its run for the family's own checks."""
    loaded = load_model(str(folder))
    assert loaded.family.name == family_name
    run = capture_run(loaded, PROMPT, bos=True)
    reference = reference_values(loaded.model, blocks_of(loaded.model), torch.from_numpy(run.token_ids)[None],
                                 reference_block)
    expected_names = set(run.value_names()) - {"position_embeddings"}
    assert expected_names <= set(reference), sorted(expected_names - set(reference))
    for name in sorted(expected_names):
        value, layer, _ = parse_full_name(name)
        captured = run.attention_probabilities(layer) if value.name == "attention_probabilities" else run[name]
        np.testing.assert_allclose(captured, reference[name], rtol=1e-5, atol=1e-5, err_msg=name)
    for layer in range(loaded.n_layers - 1):
        np.testing.assert_allclose(run[full_name("layer_output", layer)],
                                   reference[full_name("layer_input", layer + 1)], rtol=1e-5, atol=1e-5)
    return loaded, run
