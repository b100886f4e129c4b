#!/usr/bin/env bash
# Measures one sequential job spread over workers (docs/DATA_PARALLEL.md):
# a 3-layer synthetic Llama (hidden 512, MLP 1408, 8 heads, bf16; GPTQ w4
# g128 act-order, sequential propagation, 32 x 256 calibration tokens and
# 32 x 256 held-out) through quantd with local workers of one thread each:
#   - one task per block (--round_tasks=false) on 1 and 2 workers;
#   - rounds (the default) on 1 and 2 workers;
# each run's wall time, the tasks' summed time by kind (quantd's
# quant_task_duration_seconds), the speed-up over the first row, the sha256
# of the packed tensors (identical in every row), and the bytes of round
# files one block wrote (shard statistics, deltas, shard outputs).
#
#   scripts/bench_rounds.sh
#
# QUANT_BENCH_BUILD=DIR uses the programs of an existing build folder
# (configured with QUANT_BUILD_BENCHMARKS=ON) instead of building build/.
# QUANT_BENCH_ROUNDS_RUNS lists the runs as "ROUND_TASKS WORKERS
# [LAYER_REDUCES [HELDOUT_LATER [GATE_PARTS]]]" separated by ';' (default
# "false 1;false 2;true 1;true 2;true 2 false;true 2 true false": the fifth
# is rounds with one reduce per layer group, quantd's
# --round_layer_reduces=false; the last rounds whose reduces wait for the
# held-out shards too, --round_heldout_later=false). GATE_PARTS (default 0)
# is quantd's --gate_parts: the finalize's gate evaluation in that many
# tasks; "true 2 true true 2" is rounds on 2 workers with 2 gate parts.
# QUANT_BENCH_KEEP=1 keeps the work folder (printed at the end): each run's
# quantd store has every task's completion time and worker, a timeline of
# the job (sqlite3 run-*/data/quantd.db "SELECT updated_ms, kind, block,
# grp, layer, split, shard, worker_id FROM tasks ORDER BY updated_ms").
set -euo pipefail
cd "$(dirname "$0")/.."

build="${QUANT_BENCH_BUILD:-}"
if [ -z "$build" ]; then
  bash scripts/install_deps.sh >/dev/null
  QUANT_TARGETS="quantctl quantd quant-worker quant-synth-checkpoint" \
    bash scripts/build.sh release -DQUANT_BUILD_BENCHMARKS=ON >/dev/null
  build=build
fi
quantctl="$build/client/quantctl"
quantd="$build/server/quantd"
synth="$build/bench/synth/quant-synth-checkpoint"
shared="${QUANT_SHARED_DIR:-$(realpath ../shared)}"
checkpoint="$shared/models/stories260K/hf-f32"
text="$shared/data/tinystories_val.txt"
for f in "$checkpoint/config.json" "$text" "$quantd" "$synth"; do
  [ -e "$f" ] || { echo "bench_rounds: $f is missing" >&2; exit 1; }
done

work=$(mktemp -d)
quantd_pid=""
stop_quantd() {
  if [ -n "$quantd_pid" ] && kill -0 "$quantd_pid" 2>/dev/null; then
    kill -TERM "$quantd_pid"
    wait "$quantd_pid" || true
  fi
  quantd_pid=""
}
trap 'stop_quantd; [ -n "${QUANT_BENCH_KEEP:-}" ] || rm -rf "$work"' EXIT

calc() { awk "BEGIN {printf \"$1\", $2}"; }
scrape() { curl -sf "http://127.0.0.1:$metrics_port/metrics" || true; }
# Sum of quant_task_duration_seconds_sum over the given kinds.
task_seconds() {  # metrics kind...
  local metrics=$1
  shift
  local total=0 kind s
  for kind in "$@"; do
    s=$(awk -v kind="$kind" 'index($0, "quant_task_duration_seconds_sum{") == 1 &&
        index($0, "kind=\"" kind "\"") {s += $NF} END {printf "%.2f", s}' <<<"$metrics")
    total=$(calc %.2f "$total + $s")
  done
  echo "$total"
}

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== rounds: synthetic Llama, 3 layers, hidden 512, MLP 1408, 8 heads, bf16;"
echo "   GPTQ w4 g128 act-order, sequential, 32 x 256 tokens in each split"
model="$work/model"
"$synth" --out "$model" --hidden 512 --intermediate 1408 --layers 3 \
  --heads 8 --kv_heads 8 --vocab_from "$checkpoint" --seed 0 --dtype bf16 >/dev/null
cat >"$work/recipe.yaml" <<EOF
method: gptq
bits: 4
group_size: 128
grid: sym
damp: 0.01
act_order: true
propagation: sequential
calibration:
  samples: 32
  seq_len: 256
  heldout_count: 40
  heldout_samples: 32
  seed: 0
format: compressed-tensors
gates:
  max_ppl_ratio: 2.0
  max_mean_kl: 1.0
  min_top1_agreement: 0.5
EOF

printf '%-36s %7s %8s %8s %8s %8s  %s\n' run wall_s tasks_s shard_s reduce_s speedup tensors_sha256
IFS=';' read -r -a runs <<<"${QUANT_BENCH_ROUNDS_RUNS:-false 1;false 2;true 1;true 2;true 2 false;true 2 true false}"
base=""
for run in "${runs[@]}"; do
  # shellcheck disable=SC2086  # Split into the flag and the worker count.
  set -- $run
  rounds=$1 workers=$2 layer_reduces=${3:-true} heldout_later=${4:-true}
  gate_parts=${5:-0}
  run_index=$((${run_index:-0} + 1))
  dir="$work/run-$run_index-$rounds-$workers"
  mkdir -p "$dir"
  "$quantd" --listen=127.0.0.1:0 --data-dir="$dir/data" \
    --artifact-root="file://$dir/artifacts" \
    --allowed-roots="$(dirname "$checkpoint"),$(dirname "$text"),$work" \
    --local-workers="$workers" --worker-args=--threads=1 \
    --metrics-listen=127.0.0.1:0 --round_tasks="$rounds" \
    --round_layer_reduces="$layer_reduces" \
    --round_heldout_later="$heldout_later" --gate_parts="$gate_parts" \
    >"$dir/quantd.out" 2>"$dir/quantd.log" &
  quantd_pid=$!
  for _ in $(seq 1 100); do
    grep -q "metrics on port" "$dir/quantd.out" 2>/dev/null && break
    sleep 0.1
  done
  QUANT_ADDR=$(sed -n 's/^quantd: listening on //p' "$dir/quantd.out")
  metrics_port=$(sed -n 's/^quantd: metrics on port //p' "$dir/quantd.out")
  export QUANT_ADDR
  for _ in $(seq 1 300); do
    idle=$(scrape | awk '/^quant_workers\{state="idle"\}/ {print int($2)}')
    [ "${idle:-0}" -ge "$workers" ] && break
    sleep 0.1
  done
  t0=$(date +%s.%N)
  status=0
  "$quantctl" submit --checkpoint "$model" --recipe "$work/recipe.yaml" \
    --calibration "$text" --wait >"$dir/submit.out" 2>"$dir/submit.log" || status=$?
  t1=$(date +%s.%N)
  if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then
    echo "bench_rounds: submit --wait failed ($status)" >&2
    tail -n 5 "$dir/submit.log" "$dir/quantd.log" >&2
    exit 1
  fi
  metrics=$(scrape)
  stop_quantd
  [ -z "${rates:-}" ] && rates=$(grep -m1 "rates on" "$dir/quantd.log" || true)
  wall=$(calc %.1f "$t1 - $t0")
  [ -z "$base" ] && base=$wall
  job_dir=$(ls -d "$dir"/artifacts/jobs/*/)
  sha=$(sha256sum "$job_dir/checkpoint/model.safetensors" | cut -c1-16)
  label="blocks, $workers worker(s)"
  [ "$rounds" = true ] && label="rounds, $workers worker(s)"
  [ "$rounds" = true ] && [ "$layer_reduces" = false ] &&
    label="rounds, $workers, group reduces"
  [ "$rounds" = true ] && [ "$heldout_later" = false ] &&
    label="rounds, $workers, held-out first"
  [ "$gate_parts" != 0 ] && label="$label, $gate_parts gate parts"
  printf '%-36s %7s %8s %8s %8s %7sx  %s\n' "$label" "$wall" \
    "$(task_seconds "$metrics" block shard_stats reduce shard_output finalize \
      finalize_pack gate_part)" \
    "$(task_seconds "$metrics" shard_stats shard_output)" \
    "$(task_seconds "$metrics" reduce)" "$(calc %.2f "$base / $wall")" "$sha"
  if [ "$rounds" = true ] && [ "$layer_reduces" = true ] &&
    [ -d "$job_dir/work/block-00001.rounds" ]; then
    rounds_files="$job_dir/work/block-00001.rounds"
  fi
done
echo "(${rates:-no worker rates logged})"
echo "(tasks_s sums every task's time, which overlap with 2 workers; shard_s: shard statistics"
echo " and shard outputs; speed-up over the first row; the sha256 prefix is of model.safetensors)"
if [ -n "${rounds_files:-}" ]; then
  echo
  echo "== round files of block 1 (written once, read by the next tasks):"
  for pattern in '*.stats.safetensors' '*.delta.safetensors' '*.out.safetensors'; do
    printf '   %-22s %3d files %10d bytes\n' "$pattern" \
      "$(find "$rounds_files" -name "$pattern" | wc -l)" \
      "$(find "$rounds_files" -name "$pattern" -printf '%s\n' | awk '{s += $1} END {print s + 0}')"
  done
fi
if [ -n "${QUANT_BENCH_KEEP:-}" ]; then
  echo
  echo "== kept: $work"
fi
