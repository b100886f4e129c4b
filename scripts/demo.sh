#!/usr/bin/env bash
# The README's main job: set up, build, then on a checkpoint
#   1. inspect it (tensors, and which layers the packed formats can hold),
#   2. quantize it block by block with a recipe (GPTQ 4-bit by default) on
#      TinyStories calibration text: the packed checkpoint, the per-layer
#      audit against round-to-nearest, and the release gates' verdict,
#   3. evaluate the packed checkpoint as read back from disk against the
#      original on the first 300 documents.
# It grows into the service demo (quantd with local workers) with issue 6.
#
#   scripts/demo.sh [CHECKPOINT_DIR [TEXT_FILE [RECIPE]]]
set -euo pipefail
cd "$(dirname "$0")/.."

checkpoint="${1:-../shared/models/stories260K/hf-f32}"
text="${2:-../shared/data/tinystories_val.txt}"
recipe="${3:-recipes/stories260k-gptq-w4.yaml}"
for path in "$checkpoint" "$text" "$recipe"; do
  if [ ! -e "$path" ]; then
    echo "demo: $path not found" >&2
    echo "usage: scripts/demo.sh [HF_CHECKPOINT_DIR [TEXT_FILE [RECIPE]]]" >&2
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
echo "== 2. quantize with $recipe"
status=0
"$quantctl" quantize --local --checkpoint "$checkpoint" --calibration "$text" \
  --recipe "$recipe" --out "$work/packed" || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then exit "$status"; fi
ls -l "$work/packed"

echo
echo "== 3. the packed checkpoint against the original, first 300 documents"
"$quantctl" eval --checkpoint "$work/packed" --reference "$checkpoint" \
  --text "$text" --max_documents 300
if [ "$status" -eq 3 ]; then
  echo "demo: the release gates failed (exit 3): see the audit above" >&2
fi
exit "$status"
