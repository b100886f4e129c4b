#!/usr/bin/env bash
# Profiles `quantctl quantize --local` end to end with perf (Debian's
# linux-perf, installed when missing) on the job of scripts/bench.sh's
# section 7: a 2-layer synthetic Llama (hidden 1024, MLP 2816, 16 heads),
# GPTQ w4 g128 act-order, 32 x 256 tokens in each split. Prints the wall
# time and the top entries by self time, with template arguments dropped and
# entries of one name merged (Eigen's GEMM kernel has one symbol per
# instantiation).
#
#   scripts/profile_local.sh [--threads N] [--isa LEVEL] [--top N] [--idle]
#
# --idle: where the threads wait instead. Samples with call graphs (199 Hz,
# DWARF unwinding), cut into 100 ms windows; a window with fewer samples
# than N busy threads give is idle time, charged to the callers (the first
# two of our own functions on the stack) that ran in it, in proportion to
# their samples. Prints the idle and busy thread-seconds by caller.
#
# QUANT_BENCH_BUILD=DIR uses an existing build folder. Sampling is by the
# CPU clock (perf's cpu-clock event), so it works on VMs without hardware
# counters.
set -euo pipefail
cd "$(dirname "$0")/.."

threads=1
isa=""
top=15
idle=0
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift ;;
    --isa) isa="$2"; shift ;;
    --top) top="$2"; shift ;;
    --idle) idle=1 ;;
    *)
      echo "usage: scripts/profile_local.sh [--threads N] [--isa LEVEL] [--top N] [--idle]" >&2
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
if [ "$idle" = 1 ]; then
  perf record -F 199 --call-graph dwarf,16384 -o "$work/perf.data" \
    "$build/client/quantctl" "${args[@]}" >"$work/audit.json" 2>"$work/perf.log"
else
  perf record -F 499 -o "$work/perf.data" "$build/client/quantctl" "${args[@]}" \
    >"$work/audit.json" 2>"$work/perf.log"
fi
end=$(date +%s.%N)
echo "== quantize --local --threads=$threads${isa:+ --isa=$isa}: $(awk "BEGIN {printf \"%.1f\", $end - $start}") s under perf"
if [ "$idle" = 1 ]; then
  echo "== idle thread-seconds by caller (100 ms windows, $threads threads), top $top"
  perf script -i "$work/perf.data" -F tid,time,ip,sym 2>/dev/null |
    awk -v threads="$threads" -v hz=199 -v window=0.1 -v depth=2 '
      function flush() {
        if (!have) return
        k = key == "" ? first : key
        w = int((t - t0) / window)
        count[w]++
        in_window[w SUBSEP k]++
        busy[k]++
        if (w > last_window) last_window = w
        have = 0
      }
      /^ *[0-9]+ +[0-9]+\.[0-9]+:/ {
        flush()
        t = $2; sub(/:$/, "", t); t += 0
        if (t0 == "") t0 = t
        have = 1; key = ""; first = ""; frames = 0; previous = ""
        next
      }
      /^$/ { flush(); next }
      {
        if (!have) next
        sym = $0
        sub(/^[ \t]*[0-9a-f]+ /, "", sym)
        if (first == "") first = substr(sym, 1, 60)
        sub(/ \(inlined\)$/, "", sym)
        sub(/\(.*/, "", sym)
        if (sym !~ /^quant::/ || sym ~ /Eigen|ThreadPool|ParallelFor|FunctionRef|std::|lambda|absl::|Mutex|operator/) next
        if (frames < depth && sym != previous) {
          key = key == "" ? sym : key " < " sym
          previous = sym
          frames++
        }
      }
      END {
        flush()
        per = window * hz
        for (w = 0; w <= last_window; w++) {
          n = count[w] + 0
          gap = (threads * per - n) / hz
          if (gap <= 0) continue
          total += gap
          if (n == 0) continue
          for (k in busy) if ((w SUBSEP k) in in_window) idle[k] += gap * in_window[w SUBSEP k] / n
        }
        samples = 0
        for (k in busy) samples += busy[k]
        printf "   %.1f s sampled, %.2f thread-s busy, %.2f thread-s idle\n", (last_window + 1) * window, samples / hz, total
        printf "   %8s %8s  %s\n", "idle_s", "busy_s", "caller"
        for (k in idle) printf "   %8.3f %8.2f  %s\n", idle[k], busy[k] / hz, substr(k, 1, 140)
      }' | { IFS= read -r head; echo "$head"; IFS= read -r cols; echo "$cols"; sort -k1,1 -rn | head -n "$top"; }
  exit 0
fi
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
