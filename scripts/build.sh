#!/usr/bin/env bash
# Configures and builds one configuration of the project.
#
#   scripts/build.sh [release|asan|fuzz|tsan] [extra cmake args...]
#
# QUANT_TARGETS="a b" builds only those targets.
#
# release -> build/        (RelWithDebInfo, -Werror)
# asan    -> build-asan/   (ASan + UBSan)
# fuzz    -> build-fuzz/   (clang, libFuzzer targets)
# tsan    -> build-tsan/   (clang, ThreadSanitizer)
set -euo pipefail
cd "$(dirname "$0")/.."

config="${1:-release}"
shift || true
jobs="${QUANT_JOBS:-$(nproc)}"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Paths relative to the checkout, so clones elsewhere share the cache.
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi

case "$config" in
  release)
    dir=build
    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
    ;;
  asan)
    dir=build-asan
    # Benchmarks add nothing under sanitizers; the fuzz-free debug build is
    # what catches memory errors in the tests.
    args=(-DCMAKE_BUILD_TYPE=Debug -DQUANT_SANITIZE=ON
          -DQUANT_BUILD_BENCHMARKS=OFF)
    ;;
  fuzz)
    dir=build-fuzz
    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DQUANT_FUZZ=ON
          -DQUANT_BUILD_SERVICE=OFF -DQUANT_BUILD_BENCHMARKS=OFF
          -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang)
    ;;
  tsan)
    dir=build-tsan
    args=(-DCMAKE_BUILD_TYPE=Debug -DQUANT_TSAN=ON
          -DQUANT_BUILD_BENCHMARKS=OFF
          -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang)
    ;;
  *)
    echo "usage: scripts/build.sh [release|asan|fuzz|tsan] [cmake args...]" >&2
    exit 2
    ;;
esac

cmake -S . -B "$dir" -G Ninja "${launcher[@]}" "${args[@]}" "$@" >/dev/null
targets=()
for target in ${QUANT_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$dir" -j "$jobs" "${targets[@]}"
