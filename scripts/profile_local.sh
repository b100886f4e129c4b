#!/usr/bin/env bash
# Profiles `quantctl quantize --local` end to end with perf (Debian's
# linux-perf, installed when missing) on the job of scripts/bench.sh's
# section 7: a 2-layer synthetic Llama (hidden 1024, MLP 2816, 16 heads),
# GPTQ w4 g128 act-order, 32 x 256 tokens in each split. Prints the wall
# time and the top entries by self time, with template arguments dropped and
# entries of one name merged (Eigen's GEMM kernel has one symbol per
# instantiation).
#
#   scripts/profile_local.sh [--threads N] [--isa LEVEL] [--top N]
#
# QUANT_BENCH_BUILD=DIR uses an existing build folder. Sampling is by the
# CPU clock (perf's cpu-clock event), so it works on VMs without hardware
# counters.
set -euo pipefail
cd "$(dirname "$0")/.."

threads=1
isa=""
top=15
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift ;;
    --isa) isa="$2"; shift ;;
    --top) top="$2"; shift ;;
    *)
      echo "usage: scripts/profile_local.sh [--threads N] [--isa LEVEL] [--top N]" >&2
      exit 2
      ;;
  esac
  shift
done

if ! command -v perf >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y -qq --no-install-recommends linux-perf >/dev/null
fi
build="${QUANT_BENCH_BUILD:-}"
if [ -z "$build" ]; then
  bash scripts/install_deps.sh >/dev/null
  QUANT_TARGETS="quantctl quant-synth-checkpoint" bash scripts/build.sh release >/dev/null
  build=build
fi
checkpoint=../shared/models/stories260K/hf-f32
text=../shared/data/tinystories_val.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$build/bench/synth/quant-synth-checkpoint" --out "$work/model" --hidden 1024 \
  --intermediate 2816 --layers 2 --heads 16 --kv_heads 16 \
  --vocab_from "$checkpoint" --seed 0 --dtype bf16 >/dev/null
cp bench/recipes/synthetic-2layer-gptq-w4.yaml "$work/recipe.yaml"
args=(quantize --local --checkpoint "$work/model" --calibration "$text"
      --recipe "$work/recipe.yaml" --out "$work/out" --threads="$threads" --json)
[ -n "$isa" ] && args+=(--isa="$isa")
echo "== $("$build/client/quantctl" kernels | tr -s ' ' | paste -sd ';' -)"
start=$(date +%s.%N)
perf record -F 499 -o "$work/perf.data" "$build/client/quantctl" "${args[@]}" \
  >"$work/audit.json" 2>"$work/perf.log"
end=$(date +%s.%N)
echo "== quantize --local --threads=$threads${isa:+ --isa=$isa}: $(awk "BEGIN {printf \"%.1f\", $end - $start}") s under perf"
echo "== top $top by self time"
perf report -i "$work/perf.data" --no-children --sort symbol --stdio 2>/dev/null |
  awk -v top="$top" '
    /^ +[0-9.]+%/ {
      pct = $1; sub(/%/, "", pct)
      name = $0
      sub(/^ +[0-9.]+% +\[[.k]\] /, "", name)
      # Drop template arguments (nested <...>) and trailing spaces.
      while (match(name, /<[^<>]*>/)) name = substr(name, 1, RSTART - 1) substr(name, RSTART + RLENGTH)
      sub(/( +-)+ *$/, "", name)
      sub(/ +$/, "", name)
      sum[name] += pct
    }
    END {
      n = 0
      for (k in sum) { keys[++n] = k }
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (sum[keys[j]] > sum[keys[i]]) { t = keys[i]; keys[i] = keys[j]; keys[j] = t }
      for (i = 1; i <= n && i <= top; i++) printf "%6.2f%%  %s\n", sum[keys[i]], keys[i]
    }'
