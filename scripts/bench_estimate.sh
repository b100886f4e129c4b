#!/usr/bin/env bash
# How good the time and size predictions are (issue 22): for each model and
# recipe, `quantctl recipe validate --estimate` (the plan's work at this
# machine's probed rates, and the packed size counted from the formats'
# layouts) against `quantctl quantize --local` run for real on the same
# cores (wall time, and the tensor bytes the manifest records). Prints a
# table; quantd scales its ETAs by each job's finished tasks, so the ratio
# here is what the first prediction of a job is off by.
#
#   scripts/bench_estimate.sh [BUILD_DIR]   (default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
quantctl="$build/client/quantctl"
synth="$build/bench/synth/quant-synth-checkpoint"
checkpoint=${QUANT_SHARED_DIR:-../shared}/models/stories260K/hf-f32
text=${QUANT_SHARED_DIR:-../shared}/data/tinystories_val.txt
for f in "$quantctl" "$synth" "$checkpoint/config.json" "$text"; do
  [ -e "$f" ] || { echo "missing $f (build with scripts/build.sh release)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A 2-layer synthetic Llama (hidden 1024, MLP 2816), as scripts/bench.sh's
# level runs use.
"$synth" --out "$work/synth" --hidden 1024 --intermediate 2816 --layers 2 \
  --heads 16 --kv_heads 16 --vocab_from "$checkpoint" --seed 0 --dtype bf16 >/dev/null

printf '%-12s %-34s %10s %10s %7s %12s %12s\n' model recipe predicted_s actual_s ratio predicted_B written_B
run() {  # $1 label, $2 checkpoint, $3 recipe
  local estimate predicted bytes start end actual written
  estimate=$("$quantctl" recipe validate "$3" --checkpoint "$2" --estimate --json)
  predicted=$(printf '%s' "$estimate" | sed -n 's/.*"expected_seconds": \([0-9.e+-]*\).*/\1/p')
  bytes=$(printf '%s' "$estimate" | sed -n 's/.*"output_bytes": \([0-9]*\).*/\1/p')
  rm -rf "$work/out"
  start=$(date +%s.%N)
  "$quantctl" quantize --local --checkpoint "$2" --calibration "$text" \
    --recipe "$3" --out "$work/out" >/dev/null 2>&1 || [ $? -eq 3 ]
  end=$(date +%s.%N)
  actual=$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')
  written=$(sed -n 's/.*"tensor_bytes": \([0-9]*\).*/\1/p' "$work/out/manifest.json")
  printf '%-12s %-34s %10.2f %10.2f %7.2f %12s %12s\n' "$1" "$(basename "$3")" \
    "$predicted" "$actual" "$(awk -v a="$actual" -v p="$predicted" 'BEGIN { print a / p }')" \
    "$bytes" "$written"
}
# The demo's recipe, and the same with RTN and AWQ.
for method in gptq rtn awq; do
  sed -e "s/^method: .*/method: $method/" \
    -e "$([ "$method" = gptq ] || echo "s/^act_order: .*/act_order: false/")" \
    -e "s|^  tasks: tasks/|  tasks: $PWD/recipes/tasks/|" \
    recipes/stories260k-gptq-w4.yaml \
    >"$work/stories260k-$method-w4.yaml"
  run stories260K "$checkpoint" "$work/stories260k-$method-w4.yaml"
done
run synth-2L "$work/synth" bench/recipes/synthetic-2layer-gptq-w4.yaml
