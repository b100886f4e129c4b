#!/usr/bin/env bash
# Measures what docs/PERFORMANCE.md reports, on this machine, in one run:
#   1. the quantization cores against Eigen's SGEMM rate (the ceiling) and
#      blocked GPTQ against the column-by-column reference (speed-up and
#      agreement);
#   2. `quantctl quantize --local` end to end on stories260K with the demo
#      recipe: wall time and peak resident memory, per method.
#
#   scripts/bench.sh [--large]     --large adds 7B-shaped layers (minutes)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh >/dev/null
QUANT_TARGETS="quant_cores_bench quantctl" \
  bash scripts/build.sh release -DQUANT_BUILD_BENCHMARKS=ON >/dev/null

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
echo "== 1. cores (Google Benchmark; table at the end)"
./build/bench/quant_cores_bench --benchmark_color=false "$@" 2>/dev/null |
  sed -n '/^core\/args/,$p'

checkpoint=../shared/models/stories260K/hf-f32
text=../shared/data/tinystories_val.txt
if [ ! -d "$checkpoint" ]; then
  echo "bench: $checkpoint not found; end-to-end rows skipped" >&2
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo
echo "== 2. quantize --local, stories260K, recipes/stories260k-gptq-w4.yaml (method varied)"
printf '%-6s %-20s %9s %12s %10s %8s\n' method format wall_s peak_rss_mb ppl_ratio verdict
for variant in "gptq compressed-tensors 0" "gptq gptq 32" "awq compressed-tensors 0" "rtn compressed-tensors 0"; do
  set -- $variant
  sed -e "s/^method: gptq/method: $1/" -e "s/^format: compressed-tensors/format: $2/" \
      -e "s/^group_size: 0/group_size: $3/" recipes/stories260k-gptq-w4.yaml > "$work/r.yaml"
  if [ "$1" != gptq ]; then sed -i '/^act_order/d; /^damp:/d' "$work/r.yaml"; fi
  out="$work/out-$1-$2"
  status=0
  /usr/bin/time -f '%e %M' -o "$work/time" ./build/client/quantctl quantize --local \
    --checkpoint "$checkpoint" --calibration "$text" --recipe "$work/r.yaml" \
    --out "$out" --json > "$work/audit.json" 2>/dev/null || status=$?
  if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then
    echo "bench: quantize failed for $variant" >&2
    exit 1
  fi
  read -r wall rss < <(tail -1 "$work/time")
  ratio=$(grep -m1 '"ppl_ratio"' "$work/audit.json" | tr -dc '0-9.')
  verdict=$(grep -m1 '"verdict"' "$out/audit.json" | tr -dc 'A-Z')
  printf '%-6s %-20s %9s %12d %10.4f %8s\n' "$1" "$2 g$3" "$wall" "$((rss / 1024))" "$ratio" "$verdict"
done
