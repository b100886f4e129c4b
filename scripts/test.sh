#!/usr/bin/env bash
# The project's test command: installs what is missing, builds, runs every test.
#
#   scripts/test.sh            release build, all tests at every kernel
#                              level this CPU runs (QUANT_ISA=v2, v3, ...)
#   scripts/test.sh --asan     the same tests under ASan + UBSan
#   scripts/test.sh --tsan     the tests of code that runs on several threads
#                              under ThreadSanitizer (those without gRPC)
#   scripts/test.sh --fuzz S   builds the libFuzzer targets, runs each S seconds
#
# Tests that need ../shared (the stories260K model, text, tokenizers) skip
# with a reason when it is absent, and fail under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh

mode="${1:---release}"
case "$mode" in
  --release)
    bash scripts/build.sh release
    # GCC ignores the thread-safety attributes; clang checks them here.
    bash scripts/check_thread_safety.sh build
    # The whole suite at every kernel level this CPU runs below its best
    # (QUANT_ISA forces it in every test and the programs they start), then
    # at the best one, whose summary closes the log.
    levels=$(build/client/quantctl kernels --supported_names)
    best="${levels##* }"
    for level in $levels; do
      [ "$level" = "$best" ] && continue
      echo "== tests at kernel level $level (QUANT_ISA=$level)"
      QUANT_ISA="$level" ctest --test-dir build --output-on-failure -j "$(nproc)"
    done
    echo "== tests at kernel level $best (auto)"
    ctest --test-dir build --output-on-failure -j "$(nproc)"
    ;;
  --asan)
    bash scripts/build.sh asan
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
    ;;
  --tsan)
    # Whose code shares state between threads and needs no gRPC (Debian's
    # gRPC is not instrumented, so TSan cannot see its ordering): the thread
    # pool, read roots and kernel levels carried onto its threads, the
    # Hessian and GPTQ cores on a pool, block tasks and local runs at several
    # thread counts, the tokenizer's shared cache, and SQLite connections
    # racing for leases. The service's own locking is checked statically
    # (scripts/check_thread_safety.sh).
    targets="base_test kernels_test quant_cores_test text_test block_task_test
             local_pipeline_test job_store_test"
    QUANT_TARGETS="$targets" bash scripts/build.sh tsan
    labels=$(echo $targets | tr ' ' '|')
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
      ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" \
        -L "^($labels)\$"
    ;;
  --fuzz)
    seconds="${2:-30}"
    QUANT_TARGETS=fuzzers bash scripts/build.sh fuzz
    bash tests/fuzz/run_fuzzers.sh build-fuzz "$seconds"
    ;;
  *)
    echo "usage: scripts/test.sh [--release|--asan|--tsan|--fuzz SECONDS]" >&2
    exit 2
    ;;
esac
