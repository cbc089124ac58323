"""Information flow: the shares against a plain reference of the definition, the exactness of the split on every
family, the route graph's pruning and threshold, the memory bound, the CLI's NPZ and the view."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import panel as pn
import pytest
import torch
from bokeh.document import Document
from family_reference import PROMPT, save_tiny_family_model
from test_family_gemma import CONFIGS as GEMMA_CONFIGS
from test_family_gpt_neox import neox_config
from test_family_qwen3_phi3_olmo2 import CONFIGS as OTHER_CONFIGS

from layouts.flow_view import FlowView
from model_backend import PromptError, UnsupportedArchitectureError, capture_run, load_model
from model_backend import flow as flow_module
from model_backend.__main__ import main
from model_backend.flow import (FlowNode, InformationFlow, flow_graph, head_parts, information_flow,
                                post_norm_factors)
from model_backend.names import full_name

FAMILY_CONFIGS = {**GEMMA_CONFIGS, **OTHER_CONFIGS, "GPT-NeoX": neox_config(parallel=True),
                  "GPT-NeoX (sequential)": neox_config(parallel=False)}
TABLES = ("attention_heads", "attention_residual", "attention_bias", "mlp", "mlp_residual")


def proximity(whole: torch.Tensor, parts: torch.Tensor) -> torch.Tensor:
    """The definition: max(|whole|_1 - |whole - part|_1, 0), whole [hidden], parts [..., hidden]."""
    return (whole.abs().sum() - (whole - parts).abs().sum(-1)).clamp_min(0)


def reference_flow(loaded, token_ids: np.ndarray) -> dict[str, np.ndarray]:
    """The shares by the definition, every part written out in full, from transformers' own forward (its attention
    weights, and each block's input, attention write, MLP write and output read by hooks) and the model's weights."""
    model, n_heads, n_kv = loaded.model, loaded.n_heads, loaded.n_kv_heads
    gpt2 = loaded.family.name == "GPT-2"
    blocks = model.transformer.h if gpt2 else model.model.layers
    read = {}
    handles = []
    for layer, block in enumerate(blocks):
        attention, mlp = (block.attn, block.mlp) if gpt2 else (block.self_attn, block.mlp)
        handles += [block.register_forward_pre_hook(lambda _m, args, kwargs, at=layer: read.__setitem__(
                        ("input", at), (args[0] if args else kwargs["hidden_states"])[0]), with_kwargs=True),
                    attention.register_forward_hook(lambda _m, _a, out, at=layer: read.__setitem__(("attn", at),
                                                                                                  out[0][0])),
                    mlp.register_forward_hook(lambda _m, _a, out, at=layer: read.__setitem__(("mlp", at), out[0]))]
    try:
        with torch.no_grad():
            output = model(torch.from_numpy(token_ids)[None], output_attentions=True, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    tables = {name: [] for name in TABLES}
    with torch.no_grad():
        for layer, block in enumerate(blocks):
            x, pattern = read[("input", layer)], output.attentions[layer][0]  # [seq, hidden], [head, q, k]
            seq, hidden = x.shape
            if gpt2:
                values = block.attn.c_attn(block.ln_1(x))[:, 2 * hidden:].view(seq, n_heads, -1)
                head_dim = values.shape[-1]
                out_heads = [block.attn.c_proj.weight[h * head_dim:(h + 1) * head_dim] for h in range(n_heads)]
                bias = block.attn.c_proj.bias
            else:
                values = block.self_attn.v_proj(block.input_layernorm(x)).view(seq, n_kv, -1)
                values = values[:, [h // (n_heads // n_kv) for h in range(n_heads)]]
                head_dim = values.shape[-1]
                out_heads = [block.self_attn.o_proj.weight[:, h * head_dim:(h + 1) * head_dim].T
                             for h in range(n_heads)]
                bias = torch.zeros(hidden)
            mid = x + read[("attn", layer)]
            heads, residual, biases = torch.zeros(n_heads, seq, seq), torch.zeros(seq), torch.zeros(seq)
            for q in range(seq):
                parts = torch.stack([pattern[h, q, :, None] * (values[:, h] @ out_heads[h]) for h in range(n_heads)])
                near = proximity(mid[q], parts)  # [head, key]
                near_residual, near_bias = proximity(mid[q], x[q]), proximity(mid[q], bias)
                total = near.sum() + near_residual + near_bias
                heads[:, q], residual[q], biases[q] = near / total, near_residual / total, near_bias / total
            out = mid + read[("mlp", layer)]
            near_mlp = torch.stack([proximity(out[q], read[("mlp", layer)][q]) for q in range(seq)])
            near_mid = torch.stack([proximity(out[q], mid[q]) for q in range(seq)])
            for name, table in zip(TABLES, (heads, residual, biases, near_mlp / (near_mlp + near_mid),
                                            near_mid / (near_mlp + near_mid))):
                tables[name].append(table.numpy())
    return {name: np.stack(table) for name, table in tables.items()}


@pytest.fixture(scope="module")
def flows(gpt2, llama):
    """Each tiny model's run and its flow."""
    return {loaded.family.name: (loaded, run, information_flow(loaded, run))
            for loaded in (gpt2, llama) for run in [capture_run(loaded, PROMPT, bos=True)]}


@pytest.mark.parametrize("family_name", ["GPT-2", "Llama"])
def test_the_cli_and_the_flow_equal_the_definition_written_out(flows, tmp_path, family_name):
    loaded, run, flow = flows[family_name]
    out = tmp_path / "flow.npz"
    assert main(["flow", "--model", loaded.source, "--prompt", PROMPT, "--bos", "--out", str(out)]) == 0
    written = np.load(out, allow_pickle=False)
    np.testing.assert_array_equal(written["token_ids"], run.token_ids)
    assert list(written["tokens"]) == run.tokens
    reference = reference_flow(loaded, run.token_ids)
    for name in TABLES:
        assert written[f"flow.{name}"].dtype == np.float32
        np.testing.assert_allclose(written[f"flow.{name}"], reference[name], atol=1e-4, err_msg=name)
        np.testing.assert_allclose(getattr(flow, name), reference[name], atol=1e-4, err_msg=name)
    assert (flow.attention_bias != 0).any() == (family_name == "GPT-2")  # Llama's o_proj has no bias
    assert written["flow.attention_check"] == pytest.approx(flow.attention_check)


@pytest.mark.parametrize("family_name", ["GPT-2", "Llama"])
def test_the_shares_of_every_whole_sum_to_one(flows, family_name):
    flow = flows[family_name][2]
    attention = flow.attention_heads.sum(axis=(1, 3)) + flow.attention_residual + flow.attention_bias
    np.testing.assert_allclose(attention, 1.0, atol=1e-5)
    np.testing.assert_allclose(flow.mlp + flow.mlp_residual, 1.0, atol=1e-5)
    assert (flow.attention_heads >= 0).all() and (np.triu(flow.attention_heads, k=1) == 0).all()  # causal


@pytest.fixture(scope="module", params=["GPT-2", "Llama", *FAMILY_CONFIGS])
def family_model(request, gpt2, llama, tmp_path_factory):
    if request.param in ("GPT-2", "Llama"):
        return gpt2 if request.param == "GPT-2" else llama
    return load_model(str(save_tiny_family_model(tmp_path_factory.mktemp("flow"), FAMILY_CONFIGS[request.param])))


def test_the_parts_sum_to_transformers_own_stream_after_the_attention(family_model):
    loaded = family_model
    run = capture_run(loaded, PROMPT, bos=True)
    writer = loaded.module("attention_post_norm", 0) is not None
    read = {}
    handles = []
    for layer in range(loaded.n_layers):
        handles.append(loaded.module("layer", layer).register_forward_pre_hook(
            lambda _m, args, kwargs, at=layer: read.__setitem__(("input", at), (args[0] if args else
                                                                              kwargs["hidden_states"])[0]),
            with_kwargs=True))
        module = loaded.module("attention_post_norm" if writer else "attention", layer)
        handles.append(module.register_forward_hook(
            lambda _m, _a, out, at=layer: read.__setitem__(("write", at), (out if writer else out[0])[0])))
    try:
        with torch.no_grad():
            loaded.model(torch.from_numpy(run.token_ids)[None], use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    for layer in range(loaded.n_layers):
        pattern, moved, bias = head_parts(loaded, run, layer)
        factor = post_norm_factors(loaded, run, layer)
        written = torch.einsum("hqk,hkd->qd", pattern, moved) + bias
        whole = read[("input", layer)] + read[("write", layer)]
        parts_sum = read[("input", layer)] + (written if factor is None else written * factor)
        assert (parts_sum - whole).abs().max() <= 1e-5 * max(1.0, float(whole.abs().max())), layer
    flow = information_flow(loaded, run)
    assert flow.attention_check <= 1e-5 and flow.mlp_check <= 1e-5
    sums = flow.attention_heads.sum(axis=(1, 3)) + flow.attention_residual + flow.attention_bias
    # A whole no part is near (each part as far from it as it is from zero: an attention cancelling the stream) has
    # no shares: its sums are 0, and there the residual is no nearer than the attention's whole write.
    assert (np.isclose(sums, 1.0, atol=1e-5) | (sums == 0)).all()
    for layer, position in zip(*np.nonzero(sums == 0)):
        mid = run[full_name("layer_input", layer)][position] + run[full_name("attention_output", layer)][position]
        assert np.abs(mid).sum() <= np.abs(run[full_name("attention_output", layer)][position]).sum() + 1e-4


def test_an_anatomy_without_a_split_is_refused_in_words_the_page_can_show(llama):
    odd = replace(llama, family=replace(llama.family, residual="parallel", norms="sandwich"))
    with pytest.raises(UnsupportedArchitectureError, match="information flow is not decomposed for Llama yet"):
        information_flow(odd, capture_run(llama, "one two"))


def test_a_prompt_over_the_memory_bound_is_refused_with_what_to_do(llama, monkeypatch):
    run = capture_run(llama, PROMPT, bos=True)
    per_square = llama.n_layers * llama.n_heads * 4
    monkeypatch.setattr(flow_module, "FLOW_MAX_BYTES", per_square * 10 ** 2)
    with pytest.raises(PromptError, match=r"14 tokens .* shorten the prompt to at most 10 tokens.*model_backend flow"):
        information_flow(llama, run)


def synthetic_flow(seed: int = 0, n_layers: int = 3, n_heads: int = 2, seq: int = 6,
                   sinks: tuple[int, ...] = (0,)) -> InformationFlow:
    """Random shares of the right shapes, each whole's summing to 1, with one position a sink."""
    generator = np.random.default_rng(seed)
    heads = np.zeros((n_layers, n_heads, seq, seq))
    residual, bias, mlp = np.zeros((n_layers, seq)), np.zeros((n_layers, seq)), generator.random((n_layers, seq))
    for layer in range(n_layers):
        for q in range(seq):
            shares = generator.dirichlet(np.full(n_heads * (q + 1) + 2, 0.3))
            heads[layer, :, q, : q + 1] = shares[:-2].reshape(n_heads, q + 1)
            residual[layer, q], bias[layer, q] = shares[-2:]
    return InformationFlow("synthetic", "Llama", [f"t{p}" for p in range(seq)], np.arange(seq), heads, residual,
                           bias, mlp, 1 - mlp, 0.0, 0.0, sinks)


def reference_edges(flow: InformationFlow, threshold: float) -> dict[tuple, float]:
    """Every edge of the whole graph, (source position, stage, target position, stage, kind) -> share, thresholded and
    renormalized whole by whole."""
    edges = {}
    for layer in range(flow.n_layers):
        for q in range(flow.seq_len):
            parts = np.concatenate([flow.attention_heads[layer, :, q].ravel(),
                                    [flow.attention_residual[layer, q], flow.attention_bias[layer, q]]])
            kept = np.where(parts > threshold, parts, 0)
            kept = kept / kept.sum() if kept.sum() > 0 else kept
            per_key = kept[:-2].reshape(flow.n_heads, -1).sum(axis=0)
            for k in range(flow.seq_len):
                if per_key[k] > threshold:
                    edges[(k, 2 * layer, q, 2 * layer + 1, "attention")] = per_key[k]
            if kept[-2] > threshold:
                edges[(q, 2 * layer, q, 2 * layer + 1, "residual")] = kept[-2]
            mlp = np.array([flow.mlp[layer, q], flow.mlp_residual[layer, q]])
            mlp = np.where(mlp > threshold, mlp, 0)
            mlp = mlp / mlp.sum() if mlp.sum() > 0 else mlp
            for kind, share in zip(("mlp", "residual"), mlp):
                if share > threshold:
                    edges[(q, 2 * layer + 1, q, 2 * layer + 2, kind)] = share
    return edges


@pytest.mark.parametrize("threshold", [0.0, 0.04, 0.15])
@pytest.mark.parametrize("position", [-1, 3])
def test_the_graph_keeps_exactly_the_routes_that_reach_the_position(threshold, position):
    flow = synthetic_flow()
    graph = flow_graph(flow, position=position, threshold=threshold)
    start = (position % flow.seq_len, 2 * flow.n_layers)
    edges = reference_edges(flow, threshold)
    reaching, grew = {start}, True
    while grew:
        before = len(reaching)
        reaching |= {(e[0], e[1]) for e in edges if (e[2], e[3]) in reaching}
        grew = len(reaching) > before
    expected = {key: share for key, share in edges.items() if (key[2], key[3]) in reaching}
    got = {(e.source.position, e.source.stage, e.target.position, e.target.stage, e.kind): e.share
           for e in graph.edges}
    assert got.keys() == expected.keys()
    np.testing.assert_allclose([got[key] for key in expected], list(expected.values()), rtol=1e-9)
    assert {(n.position, n.stage) for n in graph.nodes} == reaching
    assert all(e.share > threshold for e in graph.edges)
    for edge in graph.edges:
        assert edge.sink == (edge.kind == "attention" and edge.source.position == 0)
        if edge.kind == "attention":
            assert sum(edge.head_shares) == pytest.approx(edge.share)


def test_a_threshold_of_one_keeps_the_position_alone_and_one_outside_is_refused():
    flow = synthetic_flow()
    graph = flow_graph(flow, threshold=1.0)
    assert graph.edges == [] and graph.nodes == [FlowNode(flow.seq_len - 1, 2 * flow.n_layers)]
    for threshold in (-0.01, 1.5, float("nan"), "high"):
        with pytest.raises(ValueError, match=r"threshold must be a number in \[0, 1\]"):
            flow_graph(flow, threshold=threshold)


def test_the_view_draws_the_routes_and_the_check_and_follows_its_slider(flows):
    loaded, run, flow = flows["Llama"]
    view = FlowView(flow, presenter=True)
    pn.Column(view).get_root(Document())
    assert view.figure.name == "flow_graph"
    assert view.figure.title.text.startswith(f"Routes into {run.seq_len - 1}:")
    assert "flow-check" in view.check.object and f"{flow.attention_check:.1e}" in view.check.object
    assert view.figure.xaxis[0].axis_label_text_font_size == "20px"
    drawn = sum(len(source.data["x0"]) for source in view.edges.values())
    assert drawn == len(view.graph.edges) > 0
    view.threshold_slider.value = 0.0
    assert sum(len(source.data["x0"]) for source in view.edges.values()) > drawn
    view.position_picker.value = 2
    assert view.figure.title.text.startswith("Routes into 2:")
    assert max(node.position for node in view.graph.nodes) == 2
    sink_view = FlowView(synthetic_flow(), threshold=0.0)
    assert len(sink_view.edges["sink"].data["x0"]) > 0 and sink_view.sinks.data["text"][0] == "sink"
    assert full_name("layer_mid", 0) in run
