#!/usr/bin/env bash
# The README's main job. Today: set up, build, then on a checkpoint
#   1. inspect it (tensors, and which layers the packed formats can hold),
#   2. measure its perplexity on held-out TinyStories text,
#   3. capture one real layer's inputs on calibration and held-out text and
#      run the one-layer lab (RTN vs GPTQ vs AWQ, with the audit).
# It grows into the service demo: quantd with local workers, a GPTQ job
# submitted, watched and reported.
#
#   scripts/demo.sh [CHECKPOINT_DIR [TEXT_FILE [LAYER]]]
set -euo pipefail
cd "$(dirname "$0")/.."

checkpoint="${1:-../shared/models/stories260K/hf-f32}"
text="${2:-../shared/data/tinystories_val.txt}"
layer="${3:-model.layers.2.mlp.down_proj}"
for path in "$checkpoint" "$text"; do
  if [ ! -e "$path" ]; then
    echo "demo: $path not found" >&2
    echo "usage: scripts/demo.sh [HF_CHECKPOINT_DIR [TEXT_FILE [LAYER]]]" >&2
    exit 1
  fi
done

bash scripts/install_deps.sh
QUANT_TARGETS=quantctl bash scripts/build.sh release
quantctl=./build/client/quantctl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== 1. inspect $checkpoint"
"$quantctl" inspect "$checkpoint"

echo
echo "== 2. perplexity on the first 300 documents of $text"
"$quantctl" eval --checkpoint "$checkpoint" --text "$text" --max_documents 300

echo
echo "== 3. one-layer lab on $layer (real activations)"
"$quantctl" capture --checkpoint "$checkpoint" --text "$text" \
  --layer "$layer" --out "$work/layer" --samples 64 --seq_len 256
"$quantctl" lab --weight "$work/layer.weight.npy" --cal "$work/layer.cal.npy" \
  --heldout "$work/layer.heldout.npy" --bits 4 --group 0 --method all
