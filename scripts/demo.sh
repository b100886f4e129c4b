#!/usr/bin/env bash
# The README's main job. Today: set up, build, and inspect the stories260K
# checkpoint (every tensor, and which linear layers the packed formats can
# hold). It grows into the service demo: quantd with local workers, a GPTQ
# job submitted, watched and reported.
#
#   scripts/demo.sh [CHECKPOINT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

checkpoint="${1:-../shared/models/stories260K/hf-f32}"
if [ ! -d "$checkpoint" ]; then
  echo "demo: checkpoint folder $checkpoint not found" >&2
  echo "usage: scripts/demo.sh [HF_CHECKPOINT_DIR]" >&2
  exit 1
fi

bash scripts/install_deps.sh
bash scripts/build.sh release
./build/client/quantctl inspect "$checkpoint"
