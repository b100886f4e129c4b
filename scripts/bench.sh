#!/usr/bin/env bash
# Measures what docs/PERFORMANCE.md reports, on this machine, in one run:
#   1. the quantization cores against Eigen's SGEMM rate (the ceiling),
#      blocked GPTQ against the column-by-column reference (speed-up and
#      agreement), and Hessian accumulation on one thread against all;
#   2. `quantctl quantize --local` end to end on stories260K with the demo
#      recipe: wall time and peak resident memory, per method;
#   3. the same job through the service: quantd with 2 local workers of one
#      thread each (`quantctl submit --wait`) against `quantize --local` on
#      one thread and on all cores, with the peak
#      memory of quantd and of a worker, and the wall time split into the
#      tasks' own time (quantd's quant_task_duration_seconds) and the rest
#      (scheduling, I/O, RPC);
#   4. with --scaling: a synthetic ~300M-parameter Llama (quant-synth-
#      checkpoint, written to a temporary folder and deleted after) through
#      quantd with independent propagation on 1 worker, 2 workers, and 1
#      worker with all threads (minutes per run);
#   5. with --activations: a 2-layer synthetic Llama quantized with a long
#      calibration set (`quantize --local`, sequential propagation), with
#      the hidden states between blocks in memory and spilled to files
#      (--max_activation_mb=0): wall time, peak memory, identical output;
#   6. with --threads: the same 2-layer model (`quantize --local`, both
#      propagations) on 1 thread and on every core: wall time, the block
#      tasks' time, peak memory, identical output;
#   7. levels: a 2-layer synthetic Llama (hidden 1024, MLP 2816, 16 heads,
#      32 x 256 tokens in each split) through `quantize --local` at every
#      kernel level this CPU runs, on 1 thread and on every core: wall
#      time, its nominal work as GFLOP/s and as a share of this machine's
#      native SGEMM rate (measured in the same run), identical output per
#      level. Nominal work: one forward pass of each split through each
#      block (causal attention), the Hessians of both splits, GPTQ's sweeps
#      (N·K² per layer, K³ per shared Hessian) and the gates' evaluation of
#      both models on the held-out split; the audit is not counted;
#   8. with --real: synthetic checkpoints shaped like Llama-3.2-1B and
#      Llama-3-8B (a few of their layers) through quantd with a release's
#      calibration (128 x 2048 tokens, 10% held out): seconds per block,
#      peak memory of quantd and of the worker, and whole models
#      extrapolated on 1, 8 and 64 workers (an hour or more);
#  10. with --moe: a Qwen3-30B-A3B-shaped synthetic checkpoint (2 of its 48
#      blocks: hidden 2048, 128 experts of 768, top-8, bf16) through quantd
#      with 1 local worker on every core (GPTQ w4 g128, natural routing,
#      QUANT_BENCH_MOE_SAMPLES x 2048 calibration tokens, default 32):
#      seconds per block, peak memory, tokens per expert, whether vLLM
#      would load it, and the whole model extrapolated (10 minutes or more);
#   9. allocator: the 2-layer job with quantctl's allocator tuning and with
#      glibc's defaults, on 1 thread and on every core: wall, user and system
#      time, minor page faults, peak memory, identical output.
#
#   scripts/bench.sh [--large] [--scaling] [--activations] [--threads] [--real] [--moe]
#                    [--only cores|local|service|levels|allocator|scaling|activations|threads|real|moe]
#
#   --large     adds 7B-shaped layers to section 1 (minutes)
#   --only S    runs one section (with --only scaling, --scaling is implied)
#
# QUANT_BENCH_BUILD=DIR uses the programs of an existing build folder
# (configured with QUANT_BUILD_BENCHMARKS=ON) instead of building build/.
# QUANT_BENCH_SCALING_LAYERS (default 24) and QUANT_BENCH_SCALING_SAMPLES
# (default 16 calibration sequences of 128 tokens) size section 4;
# QUANT_BENCH_SCALING_RUNS lists its runs as "WORKERS WORKER_FLAG" pairs
# separated by ';' (default "1 --threads=1;2 --threads=1;1 --threads=0").
# QUANT_BENCH_REAL_MODELS lists section 8's models as "NAME HIDDEN
# INTERMEDIATE HEADS KV_HEADS FULL_LAYERS MEASURED_LAYERS" separated by ';'.
# QUANT_BENCH_ACTIVATION_SAMPLES (default 128 windows of 128 tokens) sizes
# section 5, QUANT_BENCH_THREAD_SAMPLES (default 64) section 6.
set -euo pipefail
cd "$(dirname "$0")/.."

large=()
scaling=0
activations=0
threads=0
real=0
moe=0
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --large) large=(--large) ;;
    --scaling) scaling=1 ;;
    --activations) activations=1 ;;
    --threads) threads=1 ;;
    --real) real=1 ;;
    --moe) moe=1 ;;
    --only)
      only="${2:-}"
      shift
      ;;
    *)
      echo "usage: scripts/bench.sh [--large] [--scaling] [--activations] [--threads] [--real] [--moe] [--only cores|local|service|levels|allocator|scaling|activations|threads|real|moe]" >&2
      exit 2
      ;;
  esac
  shift
done
case "$only" in
  "" | cores | local | service | levels | allocator) ;;
  scaling) scaling=1 ;;
  activations) activations=1 ;;
  threads) threads=1 ;;
  real) real=1 ;;
  moe) moe=1 ;;
  *)
    echo "bench: --only must be cores, local, service, levels, allocator, scaling, activations, threads, real or moe, got '$only'" >&2
    exit 2
    ;;
esac
want() { [ -z "$only" ] || [ "$only" = "$1" ]; }

build="${QUANT_BENCH_BUILD:-}"
if [ -z "$build" ]; then
  bash scripts/install_deps.sh >/dev/null
  QUANT_TARGETS="quant_cores_bench quantctl quantd quant-worker quant-synth-checkpoint" \
    bash scripts/build.sh release -DQUANT_BUILD_BENCHMARKS=ON >/dev/null
  build=build
fi
quantctl="$build/client/quantctl"
quantd="$build/server/quantd"
synth="$build/bench/synth/quant-synth-checkpoint"

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/^Mem:/ {print $2}') GiB; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== kernels: $("$quantctl" kernels | tr -s ' ' | paste -sd ';' -)"

if want cores; then
  echo
  echo "== 1. cores (Google Benchmark; table at the end)"
  "$build/bench/quant_cores_bench" --benchmark_color=false "${large[@]}" 2>/dev/null |
    sed -n '/^core\/args/,$p'
fi

checkpoint=../shared/models/stories260K/hf-f32
text=../shared/data/tinystories_val.txt
if [ ! -d "$checkpoint" ]; then
  echo "bench: $checkpoint not found; end-to-end rows skipped" >&2
  exit 0
fi
checkpoint=$(realpath "$checkpoint")
text=$(realpath "$text")
work=$(mktemp -d)
quantd_pid=""
stop_quantd() {
  if [ -n "$quantd_pid" ] && kill -0 "$quantd_pid" 2>/dev/null; then
    kill -TERM "$quantd_pid"
    wait "$quantd_pid" || true
  fi
  quantd_pid=""
}
cleanup() {
  stop_quantd
  rm -rf "$work"
}
trap cleanup EXIT

# `quantctl quantize --local` under /usr/bin/time; prints "wall_s rss_kib".
# Exit 3 (gates FAIL) still measures the run. The JSON summary goes to
# $work/audit.json unless local_json is emptied (then local.log has the
# progress lines, with each block's time).
local_json=(--json)
run_local() {  # checkpoint recipe out [extra quantize flags...]
  local ckpt=$1 recipe=$2 out=$3
  shift 3
  local status=0
  /usr/bin/time -f '%e %M' -o "$work/time" "$quantctl" quantize --local \
    --checkpoint "$ckpt" --calibration "$text" --recipe "$recipe" \
    --out "$out" "${local_json[@]}" "$@" >"$work/audit.json" 2>"$work/local.log" || status=$?
  if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then
    echo "bench: quantize --local failed ($status)" >&2
    tail -5 "$work/local.log" >&2
    exit 1
  fi
  tail -1 "$work/time"
}

if want local; then
  echo
  echo "== 2. quantize --local, stories260K, recipes/stories260k-gptq-w4.yaml (method varied)"
  printf '%-6s %-20s %9s %12s %10s %8s\n' method format wall_s peak_rss_mb ppl_ratio verdict
  for variant in "gptq compressed-tensors 0" "gptq gptq 32" "awq compressed-tensors 0" "rtn compressed-tensors 0"; do
    # shellcheck disable=SC2086  # Split into method, format, group.
    set -- $variant
    sed -e "s/^method: gptq/method: $1/" -e "s/^format: compressed-tensors/format: $2/" \
        -e "s/^group_size: 0/group_size: $3/" \
        -e "s|^  tasks: tasks/|  tasks: $PWD/recipes/tasks/|" recipes/stories260k-gptq-w4.yaml > "$work/r.yaml"
    if [ "$1" != gptq ]; then sed -i '/^act_order/d; /^damp:/d' "$work/r.yaml"; fi
    out="$work/out-$1-$2"
    read -r wall rss < <(run_local "$checkpoint" "$work/r.yaml" "$out")
    ratio=$(grep -m1 '"ppl_ratio"' "$work/audit.json" | tr -dc '0-9.')
    verdict=$(grep -m1 '"verdict"' "$out/audit.json" | tr -dc 'A-Z')
    printf '%-6s %-20s %9s %12d %10.4f %8s\n' "$1" "$2 g$3" "$wall" "$((rss / 1024))" "$ratio" "$verdict"
  done
fi

# Starts quantd with N local workers and extra worker flags (comma-separated)
# on loopback, its state under DIR; sets QUANT_ADDR and metrics_port and
# returns once the N workers have registered.
start_quantd() {  # workers worker_args dir allowed_roots
  local workers=$1 worker_args=$2 dir=$3 roots=$4
  mkdir -p "$dir"
  local args=(--listen=127.0.0.1:0 --data-dir="$dir/data"
              --artifact-root="file://$dir/artifacts" --allowed-roots="$roots"
              --local-workers="$workers" --metrics-listen=127.0.0.1:0)
  if [ -n "$worker_args" ]; then args+=(--worker-args="$worker_args"); fi
  "$quantd" "${args[@]}" >"$dir/quantd.out" 2>"$dir/quantd.log" &
  quantd_pid=$!
  for _ in $(seq 1 100); do
    grep -q "metrics on port" "$dir/quantd.out" 2>/dev/null && break
    if ! kill -0 "$quantd_pid" 2>/dev/null; then
      cat "$dir/quantd.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  QUANT_ADDR=$(sed -n 's/^quantd: listening on //p' "$dir/quantd.out")
  metrics_port=$(sed -n 's/^quantd: metrics on port //p' "$dir/quantd.out")
  export QUANT_ADDR
  for _ in $(seq 1 300); do
    local idle
    idle=$(scrape | awk '/^quant_workers\{state="idle"\}/ {print int($2)}')
    [ "${idle:-0}" -ge "$workers" ] && return 0
    sleep 0.1
  done
  echo "bench: $workers local worker(s) did not register in 30 s" >&2
  cat "$dir/quantd.log" >&2
  exit 1
}

# Arithmetic on decimals (bash has integers only): calc FORMAT EXPRESSION.
calc() { awk "BEGIN {printf \"$1\", $2}"; }

scrape() { curl -sf "http://127.0.0.1:$metrics_port/metrics" || true; }

# Sum of a histogram's _sum or _count series for one task kind.
metric() {  # name kind
  awk -v name="$1" -v kind="$2" \
    'index($0, name "{") == 1 && index($0, "kind=\"" kind "\"") {s += $NF} END {printf "%.2f", s}'
}

# Peak resident memory (VmHWM) of a process, in MiB.
peak_mib() { awk '/^VmHWM/ {printf "%d", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo 0; }

# One job through the running quantd; prints
# "wall_s block_tasks block_s finalize_s quantd_mib worker_mib".
run_service() {  # checkpoint recipe
  local status=0 t0 t1
  t0=$(date +%s.%N)
  "$quantctl" submit --checkpoint "$1" --recipe "$2" --calibration "$text" \
    --wait >"$work/submit.out" 2>"$work/submit.log" || status=$?
  t1=$(date +%s.%N)
  if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then
    echo "bench: submit --wait failed ($status)" >&2
    tail -5 "$work/submit.log" >&2
    exit 1
  fi
  local metrics worker_mib=0 pid
  metrics=$(scrape)
  for pid in $(pgrep -P "$quantd_pid" || true); do
    local m
    m=$(peak_mib "$pid")
    [ "$m" -gt "$worker_mib" ] && worker_mib=$m
  done
  printf '%s %s %s %s %s %s\n' "$(calc %.1f "$t1 - $t0")" \
    "$(metric quant_task_duration_seconds_count block <<<"$metrics" | cut -d. -f1)" \
    "$(metric quant_task_duration_seconds_sum block <<<"$metrics")" \
    "$(metric quant_task_duration_seconds_sum finalize <<<"$metrics")" \
    "$(peak_mib "$quantd_pid")" "$worker_mib"
}

if want service; then
  echo
  echo "== 3. service end to end, stories260K, recipes/stories260k-gptq-w4.yaml"
  recipe=recipes/stories260k-gptq-w4.yaml
  printf '%-34s %7s %6s %8s %10s %8s %10s %10s\n' mode wall_s tasks block_s finalize_s other_s quantd_mb worker_mb
  local_row() {  # threads
    read -r lwall lrss < <(run_local "$checkpoint" "$recipe" "$work/local-out-$1" --threads="$1")
    printf '%-34s %7s %6s %8s %10s %8s %10s %10d\n' "quantize --local --threads=$1" "$lwall" - - - - - "$((lrss / 1024))"
  }
  local_row 1
  # One thread per worker: two workers share the cores.
  start_quantd 2 "--threads=1" "$work/svc" "$(dirname "$checkpoint"),$(dirname "$text"),$PWD/recipes"
  read -r wall blocks block_s final_s quantd_mib worker_mib < <(run_service "$checkpoint" "$recipe")
  stop_quantd
  printf '%-34s %7s %6s %8s %10s %8s %10s %10s\n' "quantd, 2 local workers, --threads=1" "$wall" \
    "$((blocks + 1))" "$block_s" "$final_s" "$(calc %.1f "$wall - $block_s - $final_s")" \
    "$quantd_mib" "$worker_mib"
  local_row 0
  echo "(--threads=0: all cores. tasks: block tasks + finalize; block_s, finalize_s: their"
  echo " summed lease-to-completion times from quantd's /metrics; other_s = wall - both:"
  echo " scheduling, I/O and RPC; worker_mb: the larger VmHWM of the two workers; for"
  echo " --local, worker_mb is the process's peak RSS)"
fi

# Sections 4 and 5: a synthetic Llama (hidden 1024, MLP 2816, 16 heads,
# bf16) with $2 layers at $1, and their recipe (GPTQ w4 g128, act-order) at
# $1 with propagation $2 and $3 calibration windows of 128 tokens.
synth_model() {
  "$synth" --out "$1" --hidden 1024 --intermediate 2816 --layers "$2" \
    --heads 16 --kv_heads 16 --vocab_from "$checkpoint" --seed 0 --dtype bf16 | sed 's/^/   /'
}
synth_recipe() {
  cat >"$1" <<EOF
method: gptq
bits: 4
group_size: 128
grid: sym
damp: 0.01
act_order: true
propagation: $2
calibration:
  samples: $3
  seq_len: 128
  heldout_count: 40
  heldout_samples: 4
  seed: 0
format: compressed-tensors
gates:
  max_ppl_ratio: 2.0
  max_mean_kl: 1.0
  min_top1_agreement: 0.5
EOF
}

if [ "$scaling" -eq 1 ]; then
  layers="${QUANT_BENCH_SCALING_LAYERS:-24}"
  samples="${QUANT_BENCH_SCALING_SAMPLES:-16}"
  IFS=';' read -r -a runs <<<"${QUANT_BENCH_SCALING_RUNS:-1 --threads=1;2 --threads=1;1 --threads=0}"
  echo
  echo "== 4. scaling: synthetic Llama, hidden 1024, MLP 2816, $layers layers, 16 heads, bf16;"
  echo "   GPTQ w4 g128, independent propagation, $samples x 128 calibration tokens"
  synth_dir="$work/synth"
  t0=$(date +%s.%N)
  synth_model "$synth_dir" "$layers"
  echo "   generated in $(calc %.1f "$(date +%s.%N) - $t0") s, $(du -sm "$synth_dir" | cut -f1) MiB on disk"
  synth_recipe "$work/scaling.yaml" independent "$samples"
  printf '%-34s %7s %8s %10s %11s %10s %10s %8s\n' run wall_s block_s finalize_s other_s quantd_mb worker_mb speedup
  base=""
  for run in "${runs[@]}"; do
    # shellcheck disable=SC2086  # Split into workers and worker flags.
    set -- $run
    start_quantd "$1" "$2" "$work/scale-$1$2" "$(dirname "$checkpoint"),$(dirname "$text"),$(realpath "$work")"
    read -r wall blocks block_s final_s quantd_mib worker_mib < <(run_service "$synth_dir" "$work/scaling.yaml")
    stop_quantd
    rm -rf "$work/scale-$1$2"
    [ -z "$base" ] && base=$wall
    label="$1 worker(s), $2"
    [ "$2" = "--threads=0" ] && label="$1 worker(s), --threads=0 (all)"
    printf '%-34s %7s %8s %10s %11s %10s %10s %7sx\n' "$label" "$wall" "$block_s" \
      "$final_s" "$(calc %.1f "$wall - $block_s - $final_s")" "$quantd_mib" "$worker_mib" \
      "$(calc %.2f "$base / $wall")"
  done
  echo "(block_s sums the block tasks' times, which overlap with 2 workers; speed-up over the first row)"
fi

if [ "$activations" -eq 1 ]; then
  samples="${QUANT_BENCH_ACTIVATION_SAMPLES:-128}"
  echo
  echo "== 5. activations: synthetic Llama, hidden 1024, MLP 2816, 2 layers, bf16;"
  echo "   GPTQ w4 g128, sequential propagation, $samples x 128 calibration tokens"
  synth_dir="$work/synth-activations"
  synth_model "$synth_dir" 2
  synth_recipe "$work/activations.yaml" sequential "$samples"
  echo "   calibration hidden states per block: $(calc %.1f "$samples * 128 * 1024 * 4 / 1048576") MiB"
  printf '%-28s %8s %8s  %s\n' run wall_s peak_mb output
  first=""
  for mb in 1024 0; do
    out="$work/activations-$mb"
    read -r wall rss < <(run_local "$synth_dir" "$work/activations.yaml" "$out" \
      --threads=1 --max_activation_mb="$mb")
    sum=$(sha256sum "$out/model.safetensors" | cut -c1-16)
    same=""
    if [ -n "$first" ]; then
      if [ "$sum" = "$first" ]; then same=" (identical)"; else same=" (DIFFERENT)"; fi
    fi
    [ -z "$first" ] && first=$sum
    printf '%-28s %8s %8s  %s\n' "--max_activation_mb=$mb" "$wall" "$((rss / 1024))" \
      "model.safetensors sha256 $sum$same"
  done
  echo "(peak_mb: the process's VmHWM, finalize included; 0 keeps every hidden state in files)"
fi

if want levels; then
  echo
  echo "== 7. levels: synthetic Llama, hidden 1024, MLP 2816, 2 layers, 16 heads, bf16;"
  echo "   GPTQ w4 g128 act-order, sequential, 32 x 256 tokens in each split, quantize --local"
  # The machine's SGEMM ceiling now: Eigen built for this CPU and OpenBLAS.
  native=$("$build/bench/quant_cores_bench" \
    --benchmark_filter='^Sgemm(NativeEigen|OpenBLAS)/1024/' 2>/dev/null |
    sed -n 's/^native SGEMM ceiling.*: \([0-9.]*\) GFLOP\/s$/\1/p')
  echo "   native SGEMM 1024^3 (best of Eigen -march=native and OpenBLAS, this run): $native GFLOP/s"
  # What the machine gives a perfectly parallel kernel on all its cores right
  # now: the ceiling for thr_speedup. A shared VM's second core is sometimes
  # mostly taken (this kernel then scaled 1.13x, not 1.88x), and end-to-end
  # speed-ups mean nothing without it.
  thread_ceiling() {
    "$build/bench/quant_cores_bench" --benchmark_filter='^HessianAccumulateThreads/' \
      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      --benchmark_color=false 2>/dev/null |
      awk '/^HessianAccumulateThreads\/.*_median / {split($1, p, "/"); t[p[4]] = $2}
           END {n = 0; for (k in t) if (k + 0 > n) n = k + 0;
                if (n > 1 && t[n] > 0) printf "%.2fx on %d threads", t[1] / t[n], n;
                else printf "n/a (one core)"}'
  }
  echo "   thread ceiling before (Hessian accumulation, 1 vs all threads, this run): $(thread_ceiling)"
  synth_dir="$work/synth-levels"
  synth_model "$synth_dir" 2
  cp bench/recipes/synthetic-2layer-gptq-w4.yaml "$work/levels.yaml"
  # The nominal work in GFLOP (see the header), from the model's shapes.
  nominal=$(awk -v h=1024 -v f=2816 -v q=1024 -v kv=1024 -v L=256 -v B=2 -v V=512 \
    -v tc=8192 -v th=8192 'BEGIN {
      lin = h * q + 2 * h * kv + q * h + 3 * h * f
      fwd = 2 * lin + 2 * L * q
      calib = B * (tc + th) * fwd
      hess = B * (tc + th) * (h * h + q * q + h * h + f * f)
      gptq = B * ((q + 2 * kv) * h * h + h ^ 3 + h * q * q + q ^ 3 \
                  + 2 * f * h * h + h ^ 3 + h * f * f + f ^ 3)
      gates = 2 * th * (B * fwd + 2 * h * V)
      printf "%.1f", (calib + hess + gptq + gates) / 1e9 }')
  echo "   nominal work: $nominal GFLOP"
  printf '%-22s %8s %8s %9s %11s %8s  %s\n' run wall_s GFLOP/s of_native thr_speedup peak_mb output
  cores=$(nproc)
  counts="1"
  [ "$cores" -gt 1 ] && counts="1 $cores"
  local_json=()
  for level in $("$quantctl" kernels --supported_names); do
    first="" base=""
    for n in $counts; do
      out="$work/levels-$level-$n"
      read -r wall rss < <(run_local "$synth_dir" "$work/levels.yaml" "$out" \
        --threads="$n" --isa="$level")
      sum=$(sha256sum "$out/model.safetensors" | cut -c1-16)
      same=""
      if [ -n "$first" ]; then
        if [ "$sum" = "$first" ]; then same=" (identical)"; else same=" (DIFFERENT)"; fi
      fi
      [ -z "$first" ] && first=$sum base=$wall
      rate=$(calc %.1f "$nominal / $wall")
      printf '%-22s %8s %8s %8s%% %11s %8d  %s\n' "$level --threads=$n" "$wall" "$rate" \
        "$(calc %.0f "100 * $rate / $native")" "$(calc %.2fx "$base / $wall")" "$((rss / 1024))" \
        "model.safetensors sha256 $sum$same"
    done
  done
  echo "   thread ceiling after: $(thread_ceiling)"
  echo "(of_native: nominal GFLOP/s over one core's native SGEMM rate, also for --threads=$cores;"
  echo " thr_speedup: wall time on 1 thread over this row's; compare it with the thread"
  echo " ceiling measured before and after the runs)"
fi

if want allocator; then
  echo
  echo "== 9. allocator: the same 2-layer job at the highest level, with quantctl's"
  echo "   allocator tuning (large matrices kept in the heap, core/base/allocator_tuning.h)"
  echo "   and with glibc's defaults (any GLIBC_TUNABLES turns the tuning off), twice each"
  cores=$(nproc)
  synth_dir="$work/synth-allocator"
  [ -d "$synth_dir" ] || synth_model "$synth_dir" 2
  printf '%-30s %8s %8s %8s %10s %9s  %s\n' run wall_s user_s sys_s minor_flt rss_mb output
  for n in 1 "$cores"; do
    for round in 1 2; do
      for mode in tuned glibc; do
        out="$work/alloc-$mode-$n-$round"
        tunables=()
        [ "$mode" = glibc ] && tunables=(env GLIBC_TUNABLES=glibc.malloc.check=0)
        "${tunables[@]}" /usr/bin/time -f '%e %U %S %R %M' -o "$work/time" "$quantctl" quantize --local \
          --checkpoint "$synth_dir" --calibration "$text" \
          --recipe bench/recipes/synthetic-2layer-gptq-w4.yaml --out "$out" \
          --threads="$n" --json >/dev/null 2>"$work/local.log" || {
          echo "bench: quantize --local failed" >&2; tail -5 "$work/local.log" >&2; exit 1; }
        read -r wall user sys faults rss < "$work/time"
        printf '%-30s %8s %8s %8s %10s %9d  %s\n' "$mode --threads=$n (round $round)" "$wall" "$user" \
          "$sys" "$faults" "$((rss / 1024))" "sha256 $(sha256sum "$out/model.safetensors" | cut -c1-16)"
        rm -rf "$out"
      done
    done
  done
fi

if [ "$real" -eq 1 ]; then
  echo
  echo "== 8. real sizes: synthetic Llama-3.2-1B and Llama-3-8B shapes through quantd,"
  echo "   1 local worker on every core; GPTQ w4 g128 act-order, sequential,"
  echo "   128 x 2048 calibration tokens, 10% of the documents held out"
  cp bench/recipes/real-sizes-gptq-w4.yaml "$work/real.yaml"
  printf '%-26s %6s %8s %10s %11s %10s %10s\n' model layers wall_s s_per_block finalize_s quantd_mb worker_mb
  rows=()
  # name hidden intermediate heads kv_heads full_layers measured_layers
  IFS=';' read -r -a models <<<"${QUANT_BENCH_REAL_MODELS:-llama-3.2-1b 2048 8192 32 8 16 2;llama-3-8b 4096 14336 32 8 32 1}"
  for spec in "${models[@]}"; do
    read -r name hidden inter heads kv full layers <<<"$spec"
    dir="$work/real-$name"
    "$synth" --out "$dir" --hidden "$hidden" --intermediate "$inter" --layers "$layers" \
      --heads "$heads" --kv_heads "$kv" --vocab_from "$checkpoint" --seed 0 --dtype bf16 \
      --max_positions 2048 >/dev/null
    start_quantd 1 "--threads=$(nproc)" "$work/svc-$name" "$work,$(dirname "$text")"
    read -r wall blocks block_s final_s quantd_mib worker_mib < <(run_service "$dir" "$work/real.yaml")
    stop_quantd
    per_block=$(calc %.1f "$block_s / $blocks")
    printf '%-26s %6s %8s %10s %11s %10s %10s\n' "$name" "$layers/$full" "$wall" "$per_block" \
      "$final_s" "$quantd_mib" "$worker_mib"
    rows+=("$name $full $per_block $(calc %.1f "$final_s / $layers")")
    rm -rf "$dir" "$work/svc-$name"
  done
  echo
  echo "   whole models extrapolated from the measured per-block costs (workers like this one):"
  printf '   %-16s %-12s %12s %12s %12s\n' model propagation "1 worker" "8 workers" "64 workers"
  for row in "${rows[@]}"; do
    read -r name full per_block final_per_block <<<"$row"
    finalize=$(calc %.0f "$final_per_block * $full")
    for prop in sequential independent; do
      line=""
      for w in 1 8 64; do
        if [ "$prop" = sequential ]; then
          t=$(calc %.0f "$full * $per_block + $finalize")
        else
          t=$(calc %.0f "int(($full + $w - 1) / $w) * $per_block + $finalize")
        fi
        line+=$(printf ' %11.1fh' "$(calc %.4f "$t / 3600")")
      done
      printf '   %-16s %-12s%s\n' "$name" "$prop" "$line"
    done
  done
  echo "   (sequential: blocks run one after another today, so more workers do not shorten it;"
  echo "    independent: blocks side by side, each block's cost taken as the sequential one's;"
  echo "    finalize: the gates over every block, on one worker. The synthetic models take"
  echo "    stories260K's 512-token vocabulary: a real 128,256-token lm_head adds"
  echo "    2 x hidden x 128,256 flops per held-out token for each of the two models)"
fi

if [ "$moe" -eq 1 ]; then
  samples="${QUANT_BENCH_MOE_SAMPLES:-32}"
  echo
  echo "== 10. MoE: a Qwen3-30B-A3B-shaped slice (2 of 48 blocks; hidden 2048, 32 heads over"
  echo "   4 KV heads, 128 experts of 768, top-8, bf16) through quantd, 1 local worker on"
  echo "   every core; GPTQ w4 g128, natural routing, $samples x 2048 calibration tokens"
  dir="$work/moe-slice"
  "$synth" --out "$dir" --moe_family qwen3_moe --hidden 2048 --intermediate 6144 \
    --expert_intermediate 768 --experts 128 --experts_per_token 8 --layers 2 --heads 32 \
    --kv_heads 4 --vocab_from "$checkpoint" --seed 0 --dtype bf16 --max_positions 2048 >/dev/null
  sed "s/^  samples: .*/  samples: $samples/" bench/recipes/qwen3-moe-slice-gptq-w4.yaml >"$work/moe.yaml"
  start_quantd 1 "--threads=$(nproc)" "$work/svc-moe" "$work,$(dirname "$text")"
  read -r wall blocks block_s final_s quantd_mib worker_mib < <(run_service "$dir" "$work/moe.yaml")
  stop_quantd
  per_block=$(calc %.1f "$block_s / $blocks")
  printf '%-26s %6s %8s %11s %11s %10s %10s\n' model blocks wall_s s_per_block finalize_s quantd_mb worker_mb
  printf '%-26s %6s %8s %11s %11s %10s %10s\n' qwen3-30b-a3b-slice "$blocks/48" "$wall" "$per_block" \
    "$final_s" "$quantd_mib" "$worker_mib"
  audit=$(find "$work/svc-moe" -name audit.json | head -1)
  if [ -n "$audit" ]; then
    # Both exit 3 when a gate fails or vLLM would not load it: still shown.
    { "$quantctl" report "$(dirname "$audit")" || true; } |
      grep -E "^(verdict|gate |experts of block)" | sed 's/^/   /' || true
    { "$quantctl" check "$(dirname "$audit")" || true; } | sed 's/^/   /'
  fi
  echo "   whole model (48 blocks) on one worker like this one: $(calc %.1f "(48 * $per_block + 24 * $final_s) / 3600") h"
  echo "   (sequential propagation; finalize scaled by 48/2 blocks; each block's experts"
  echo "    are computed on the rows routed to them, so an expert costs its share of tokens)"
  rm -rf "$dir" "$work/svc-moe"
fi

if [ "$threads" -eq 1 ]; then
  samples="${QUANT_BENCH_THREAD_SAMPLES:-64}"
  cores=$(nproc)
  echo
  echo "== 6. threads: synthetic Llama, hidden 1024, MLP 2816, 2 layers, bf16;"
  echo "   GPTQ w4 g128, $samples x 128 calibration tokens, quantize --local"
  synth_dir="$work/synth-threads"
  synth_model "$synth_dir" 2
  printf '%-26s %8s %8s %8s %12s  %s\n' run wall_s block_s peak_mb speedup output
  counts="1"
  [ "$cores" -gt 1 ] && counts="1 $cores"
  local_json=()
  for propagation in sequential independent; do
    synth_recipe "$work/threads.yaml" "$propagation" "$samples"
    first="" base_wall="" base_block=""
    for n in $counts; do
      out="$work/threads-$propagation-$n"
      read -r wall rss < <(run_local "$synth_dir" "$work/threads.yaml" "$out" --threads="$n")
      block_s=$(sed -n 's/^\[quantize\] block .* done in \([0-9.]*\) s$/\1/p' "$work/local.log" |
        awk '{s += $1} END {printf "%.1f", s}')
      sum=$(sha256sum "$out/model.safetensors" | cut -c1-16)
      same=""
      if [ -n "$first" ]; then
        if [ "$sum" = "$first" ]; then same=" (identical)"; else same=" (DIFFERENT)"; fi
      fi
      [ -z "$first" ] && first=$sum base_wall=$wall base_block=$block_s
      printf '%-26s %8s %8s %8s %12s  %s\n' "$propagation --threads=$n" "$wall" "$block_s" \
        "$((rss / 1024))" "$(calc %.2f "$base_wall / $wall")x/$(calc %.2f "$base_block / $block_s")x" \
        "model.safetensors sha256 $sum$same"
    done
  done
  echo "(block_s: the block tasks' own time; speedup: wall and block time over --threads=1;"
  echo " the rest of the wall time is loading, shard writing and the lm_head, on one thread)"
fi
