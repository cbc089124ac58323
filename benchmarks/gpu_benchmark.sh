#!/usr/bin/env bash
# The page and capture benchmarks on an accelerator: the served page computing with --device DEVICE (default cuda)
# against the plain forward on the same device in the page's compute, and the capture against the plain forward.
# Prints the card's name first. Run from the repository's root on a machine with the GPU:
#     bash benchmarks/gpu_benchmark.sh [DEVICE] [MODEL]
# (DEVICE cpu runs the same commands on the CPU, to check them where no GPU is lent.)
set -euo pipefail
DEVICE="${1:-cuda}"
MODEL="${2:-HuggingFaceTB/SmolLM2-135M-Instruct}"
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
if [ "$DEVICE" = cuda ]; then
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
fi
python -c "import torch; print('torch', torch.__version__, 'cuda available:', torch.cuda.is_available())"
date -u; uptime
python benchmarks/capture_benchmark.py --device "$DEVICE" --lengths 32 256 1024 --repeats 5
python benchmarks/page_benchmark.py --device "$DEVICE" --model "$MODEL" --lengths 32 512 --tabs-at 128 --repeats 3 \
  --no-first-visit
