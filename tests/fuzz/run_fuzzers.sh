#!/usr/bin/env bash
# Runs every libFuzzer binary built in BUILD_DIR/tests/fuzz for SECONDS each,
# starting from a temporary copy of its seed corpus (the folders listed in
# tests/fuzz/<fuzzer>.seeds, relative to the repository root), then replays
# its regression inputs (tests/fuzz/regressions/<name without _fuzzer>/).
# A libFuzzer dictionary tests/fuzz/<fuzzer>.dict is used when present.
# Exits non-zero if any fuzzer or replay crashes; crash inputs are left in
# the artifact folder it prints.
#
# A fixed libFuzzer seed (QUANT_FUZZ_SEED, default 1) makes a CI run repeat
# the same input sequence, so its outcome does not depend on luck; set
# another seed to explore further. An input that runs over 10 s counts as a
# hang.
#
# QUANT_FUZZ_SKIP="a_fuzzer b_fuzzer" leaves those out of the timed run;
# their regression inputs are still replayed.
#
# Usage: tests/fuzz/run_fuzzers.sh BUILD_DIR SECONDS
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build_dir=$1
seconds=$2
repo=$(cd "$(dirname "$0")/../.." && pwd)
fuzz_src="$repo/tests/fuzz"
work=$(mktemp -d "${TMPDIR:-/tmp}/quant-fuzz-XXXXXX")
artifacts="$work/artifacts"
mkdir -p "$artifacts"

fuzzers=()
for binary in "$build_dir"/tests/fuzz/*_fuzzer; do
  [[ -x "$binary" && -f "$binary" ]] && fuzzers+=("$binary")
done
if [[ ${#fuzzers[@]} -eq 0 ]]; then
  echo "no *_fuzzer binaries in $build_dir/tests/fuzz (configure with" \
       "-DQUANT_FUZZ=ON and build them)" >&2
  exit 1
fi

failed=0
for binary in "${fuzzers[@]}"; do
  name=$(basename "$binary")
  skip=0
  for skipped in ${QUANT_FUZZ_SKIP:-}; do
    [[ "$skipped" == "$name" ]] && skip=1
  done
  corpus="$work/corpus-$name"
  mkdir -p "$corpus"
  if [[ -f "$fuzz_src/$name.seeds" ]]; then
    while IFS= read -r seed_dir; do
      [[ -z "$seed_dir" || "$seed_dir" == \#* ]] && continue
      cp "$repo/$seed_dir"/* "$corpus"/ 2>/dev/null || true
    done < "$fuzz_src/$name.seeds"
  fi
  if [[ $skip -eq 1 ]]; then
    echo "== $name: not fuzzed (QUANT_FUZZ_SKIP)"
  else
  echo "== $name: fuzzing for ${seconds}s from $(ls "$corpus" | wc -l) seeds"
  dict_flag=()
  [[ -f "$fuzz_src/$name.dict" ]] && dict_flag=(-dict="$fuzz_src/$name.dict")
  if ! "$binary" -max_total_time="$seconds" -print_final_stats=1 \
      -seed="${QUANT_FUZZ_SEED:-1}" -timeout=10 -rss_limit_mb=2048 \
      "${dict_flag[@]}" -artifact_prefix="$artifacts/$name-" "$corpus" \
      > "$work/$name.log" 2>&1; then
    echo "!! $name crashed; log: $work/$name.log, inputs: $artifacts" >&2
    tail -n 40 "$work/$name.log" >&2
    failed=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$work/$name.log" | tail -n 2
  fi
  fi

  regressions="$fuzz_src/regressions/${name%_fuzzer}"
  if [[ -d "$regressions" ]]; then
    inputs=()
    for input in "$regressions"/*; do
      [[ -f "$input" ]] && inputs+=("$input")
    done
    if [[ ${#inputs[@]} -gt 0 ]]; then
      echo "== $name: replaying ${#inputs[@]} regression inputs"
      if ! "$binary" "${inputs[@]}" > "$work/$name-regressions.log" 2>&1; then
        echo "!! $name crashed on a regression input;" \
             "log: $work/$name-regressions.log" >&2
        tail -n 40 "$work/$name-regressions.log" >&2
        failed=1
      fi
    fi
  fi
done

if [[ $failed -ne 0 ]]; then
  echo "FAILED (work folder kept: $work)" >&2
  exit 1
fi
rm -rf "$work"
echo "all fuzzers ran clean"
