"""Measurements of the demo model: held-out loss, attention-sink figures, logit lens.

Every figure is computed with the model in float32 and ``attn_implementation="eager"``
(so that attention probabilities can be returned) and with the BOS token
``<|endoftext|>`` at position 0 of every chunk, exactly as documented in
``assets/demo-gpt2/README.md``:

* held-out loss: the held-out text is tokenized once and cut into consecutive
  chunks of 255 tokens, each prefixed with BOS (256 tokens, the last chunk may be
  shorter); the loss is the mean next-token cross-entropy (nats) over all
  predicted tokens, the BOS -> first-token prediction included.  Nats per
  character divide the summed loss by the number of characters of the text.
* sink figures use chunks of 128 tokens (BOS + 127 text tokens; an incomplete
  last chunk is dropped) and are averaged over the chunks:
  - attention share on key 0 for layer L: mean over heads and query positions
    q >= 1 of ``probs[L][h, q, 0]``;
  - value ratio for head h of layer L: norm of the head's value vector at
    position 0 divided by the median norm over positions p >= 1, where the value
    vector is the value slice of ``c_attn`` applied to the ``ln_1`` output;
  - norm ratio for layer L: norm of the block-L output at position 0 divided by
    the median norm over positions p >= 1 (block outputs are taken with forward
    hooks, so the last block is read before ``ln_f``).
* logit lens: each block output at the last position is read through ``ln_f``
  and ``lm_head``; the top token is reported per layer.
"""

import math
from contextlib import contextmanager

import torch
import torch.nn.functional as F

LOSS_CHUNK_TEXT_TOKENS = 255
SINK_CHUNK_TOKENS = 128


def bos_chunks(token_ids, bos_id, text_tokens, keep_partial):
    """Cut ``token_ids`` into consecutive pieces of ``text_tokens``, each prefixed with BOS."""
    chunks = []
    for start in range(0, len(token_ids), text_tokens):
        piece = token_ids[start:start + text_tokens]
        if len(piece) == text_tokens or (keep_partial and piece):
            chunks.append([bos_id] + list(piece))
    return chunks


@torch.no_grad()
def heldout_loss(model, token_ids, bos_id, n_chars):
    """Return (mean nats per predicted token, nats per character) on the held-out tokens."""
    total_nats, total_tokens = 0.0, 0
    for chunk in bos_chunks(token_ids, bos_id, LOSS_CHUNK_TEXT_TOKENS, keep_partial=True):
        ids = torch.tensor([chunk])
        logits = model(input_ids=ids).logits[0, :-1].float()
        total_nats += F.cross_entropy(logits, ids[0, 1:], reduction="sum").item()
        total_tokens += len(chunk) - 1
    return total_nats / total_tokens, total_nats / n_chars


@contextmanager
def block_recorder(model):
    """Record, per forward pass, each transformer block's input and output hidden states."""
    record = {"inputs": {}, "outputs": {}}
    handles = []
    for index, block in enumerate(model.transformer.h):
        def hook(module, args, kwargs, output, index=index):
            hidden_in = args[0] if args else kwargs["hidden_states"]
            hidden_out = output[0] if isinstance(output, tuple) else output
            record["inputs"][index] = hidden_in.detach()
            record["outputs"][index] = hidden_out.detach()
        handles.append(block.register_forward_hook(hook, with_kwargs=True))
    try:
        yield record
    finally:
        for handle in handles:
            handle.remove()


def position0_ratio(vectors):
    """Norm at position 0 divided by the median norm over positions >= 1 (last dim = features)."""
    norms = vectors.norm(dim=-1)
    return norms[..., 0] / norms[..., 1:].median(dim=-1).values


def head_values(block, hidden_in, n_head):
    """Per-head value vectors (heads, positions, head_dim) of one block for one sequence."""
    n_embd = hidden_in.shape[-1]
    normed = block.ln_1(hidden_in[0])
    weight, bias = block.attn.c_attn.weight, block.attn.c_attn.bias
    values = normed @ weight[:, 2 * n_embd:] + bias[2 * n_embd:]
    return values.view(values.shape[0], n_head, n_embd // n_head).transpose(0, 1)


@torch.no_grad()
def sink_figures(model, token_ids, bos_id):
    """Per-layer attention share on key 0 (also per head), norm ratio and per-head value ratios."""
    n_layer, n_head = model.config.n_layer, model.config.n_head
    chunks = bos_chunks(token_ids, bos_id, SINK_CHUNK_TOKENS - 1, keep_partial=False)
    head_share = torch.zeros(n_layer, n_head)
    norm_ratio = torch.zeros(n_layer)
    value_ratio = torch.zeros(n_layer, n_head)
    with block_recorder(model) as record:
        for chunk in chunks:
            out = model(input_ids=torch.tensor([chunk]), output_attentions=True)
            for layer in range(n_layer):
                head_share[layer] += out.attentions[layer][0, :, 1:, 0].float().mean(dim=-1)
                norm_ratio[layer] += position0_ratio(record["outputs"][layer][0].float())
                values = head_values(model.transformer.h[layer], record["inputs"][layer].float(), n_head)
                value_ratio[layer] += position0_ratio(values)
    count = len(chunks)
    head_share /= count
    return {
        "attention_share_on_key0": head_share.mean(dim=1).tolist(),
        "attention_share_on_key0_per_head": head_share.tolist(),
        "norm_ratio_pos0": (norm_ratio / count).tolist(),
        "value_ratio_pos0": (value_ratio / count).tolist(),
        "sink_chunks": count,
    }


@torch.no_grad()
def logit_lens(model, tokenizer, prompt, bos_id):
    """Top token per layer at the last position of ``BOS + prompt`` (block outputs through ln_f, lm_head)."""
    ids = torch.tensor([[bos_id] + tokenizer.encode(prompt)])
    with block_recorder(model) as record:
        model(input_ids=ids)
    tops = []
    for layer in range(model.config.n_layer):
        hidden = model.transformer.ln_f(record["outputs"][layer][0, -1])
        tops.append(tokenizer.decode([int(model.lm_head(hidden).argmax())]))
    return tops


def sink_summary(figures):
    """Per layer: the smallest value ratio among the heads with the highest key-0 share.

    "Heads with the highest key-0 share" are the heads whose share is at least half of
    the layer's largest per-head share.
    """
    summary = []
    for shares, ratios in zip(figures["attention_share_on_key0_per_head"], figures["value_ratio_pos0"]):
        top = max(shares)
        summary.append(min(r for s, r in zip(shares, ratios) if s >= top / 2))
    return summary


def measure(model, tokenizer, heldout_text, prompts):
    """All measurements of ``model`` on ``heldout_text`` as a JSON-serialisable dict."""
    bos_id = tokenizer.bos_token_id
    token_ids = tokenizer.encode(heldout_text)
    loss, nats_per_char = heldout_loss(model, token_ids, bos_id, len(heldout_text))
    figures = sink_figures(model, token_ids, bos_id)
    return {
        "heldout_loss": loss,
        "heldout_perplexity": math.exp(loss),
        "heldout_nats_per_char": nats_per_char,
        "heldout_tokens": len(token_ids),
        "heldout_chars": len(heldout_text),
        **figures,
        "smallest_value_ratio_among_top_key0_heads": sink_summary(figures),
        "chunk_tokens": SINK_CHUNK_TOKENS,
        "loss_chunk_tokens": LOSS_CHUNK_TEXT_TOKENS + 1,
        "logit_lens": {prompt: logit_lens(model, tokenizer, prompt, bos_id) for prompt in prompts},
    }
