#!/usr/bin/env bash
# The load test of docs/RELIABILITY.md: builds quant_loadtest, quantd and
# quant-worker (release build in build/; incremental), then runs 60 s of
# concurrent clients against a quantd with local workers on loopback and
# prints the table (requests/s, p50/p99 per RPC, jobs, errors, lost).
# Exits non-zero when any error or lost job was seen.
#
#   scripts/load_test.sh [seconds] [extra quant_loadtest flags...]
#   scripts/load_test.sh 60 --clients=8 --workers=2
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true

bin=build/bench/load/quant_loadtest
# Incremental: quick when everything is up to date.
QUANT_TARGETS="quant_loadtest quantd quant-worker" \
  bash scripts/build.sh release >/dev/null

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== $bin --duration=$seconds --clients=8 --workers=2 $*"
exec "$bin" --duration="$seconds" --clients=8 --workers=2 \
  --shared="${QUANT_SHARED_DIR:-../shared}" "$@"
