#!/usr/bin/env bash
# The README's main job, on the embedded default: set up and build, start
# quantd on loopback (SQLite state in a temporary directory, two local
# workers), then
#   1. inspect the checkpoint,
#   2. submit a GPTQ 4-bit job with TinyStories calibration text,
#   3. watch it block by block, a row per layer as the workers finish it,
#   4. print its report: the per-layer audit against round-to-nearest, the
#      release gates and the verdict,
#   5. fetch the packed checkpoint and evaluate it against the original.
# quantd and its workers stop when the script ends. Exit 0: gates PASS;
# 3: gates FAIL (the checkpoint is still written); 1: error.
#
#   scripts/demo.sh [CHECKPOINT_DIR [TEXT_FILE [RECIPE]]]
#
# QUANT_DEMO_LOCAL=1 runs the same job in one process instead
# (`quantctl quantize --local`), without the service.
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
checkpoint=$(realpath "$checkpoint")
text=$(realpath "$text")

bash scripts/install_deps.sh
QUANT_TARGETS="quantctl quantd quant-worker" bash scripts/build.sh release
quantctl=./build/client/quantctl
work=$(mktemp -d)
quantd_pid=""
cleanup() {
  if [ -n "$quantd_pid" ] && kill -0 "$quantd_pid" 2>/dev/null; then
    kill -TERM "$quantd_pid"
    wait "$quantd_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== 1. inspect $checkpoint"
"$quantctl" inspect "$checkpoint"

if [ "${QUANT_DEMO_LOCAL:-0}" = 1 ]; then
  echo
  echo "== 2. quantize in this process with $recipe"
  status=0
  "$quantctl" quantize --local --checkpoint "$checkpoint" --calibration "$text" \
    --recipe "$recipe" --out "$work/packed" || status=$?
  if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then exit "$status"; fi
else
  echo
  echo "== starting quantd (state in $work, 2 local workers)"
  ./build/server/quantd --listen=127.0.0.1:0 --data-dir="$work/data" \
    --artifact-root="file://$work/artifacts" \
    --allowed-roots="$(dirname "$checkpoint"),$(dirname "$text"),$(cd "$(dirname "$recipe")" && pwd)" \
    --local-workers=2 >"$work/quantd.out" 2>"$work/quantd.log" &
  quantd_pid=$!
  for _ in $(seq 1 100); do
    grep -q "listening on" "$work/quantd.out" 2>/dev/null && break
    if ! kill -0 "$quantd_pid" 2>/dev/null; then
      cat "$work/quantd.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  QUANT_ADDR=$(sed -n 's/^quantd: listening on //p' "$work/quantd.out")
  export QUANT_ADDR
  echo "quantd: $QUANT_ADDR"

  echo
  echo "== 2. submit with $recipe"
  job=$("$quantctl" submit --checkpoint "$checkpoint" --recipe "$recipe" \
    --calibration "$text" --label demo=stories260k)
  echo "job: $job"

  echo
  echo "== 3. watch $job"
  status=0
  "$quantctl" watch "$job" || status=$?
  if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then
    cat "$work/quantd.log" >&2
    exit "$status"
  fi

  echo
  echo "== 4. report $job"
  "$quantctl" report "$job" || true

  echo
  echo "== 5. fetch the packed checkpoint"
  "$quantctl" fetch "$job" "$work/packed"
fi
ls -l "$work/packed"
# The checkpoint's report page outlives the demo's temporary folder.
report_page="${QUANT_DEMO_REPORT:-${TMPDIR:-/tmp}/quant-demo-report.html}"
cp "$work/packed/report.html" "$report_page"
echo "report page (open it in a browser): $report_page"

echo
echo "== the packed checkpoint against the original, first 300 documents"
"$quantctl" eval --checkpoint "$work/packed" --reference "$checkpoint" \
  --text "$text" --max_documents 300
if [ "$status" -eq 3 ]; then
  echo "demo: the release gates failed (exit 3): see the report above" >&2
fi
exit "$status"
