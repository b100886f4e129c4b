#!/usr/bin/env bash
# Checks that core/ still compiles for another architecture: every core/
# source through Debian's aarch64 cross compiler (g++-aarch64-linux-gnu,
# installed when missing), syntax only (-fsyntax-only: no aarch64 libraries
# needed), with the flags of the aarch64 build: one kernel level,
# "baseline", and Eigen's BLAS backend renamed as cmake/QuantKernels.cmake
# does. The header-only dependencies come from this machine's /usr/include
# through a folder of links, so no x86 system header is seen.
#
#   scripts/check_cross.sh [FILE...]   (default: every core/ source)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v aarch64-linux-gnu-g++ >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -qq --no-install-recommends g++-aarch64-linux-gnu >/dev/null
fi
include=$(mktemp -d)
trap 'rm -rf "$include"' EXIT
ln -s /usr/include/absl /usr/include/nlohmann "$include/"
ln -s /usr/include/eigen3/Eigen "$include/Eigen"
for header in yaml.h utf8proc.h pcre2.h; do ln -s "/usr/include/$header" "$include/"; done
mkdir "$include/openssl"
ln -s /usr/include/openssl/*.h "$include/openssl/"
# opensslconf.h and configuration.h: the 64-bit little-endian ones fit.
ln -sf /usr/include/x86_64-linux-gnu/openssl/*.h "$include/openssl/"

defines=(-DEIGEN_USE_BLAS -DQUANT_VERSION='"cross-check"')
for prefix in s d; do
  for routine in gemm gemv syrk symm symv trsm trmm axpy trmv; do
    defines+=("-D${prefix}${routine}_=quant_blas_${prefix}${routine}")
  done
done
flags=(-std=c++17 -fsyntax-only -Wall -Wextra -Werror -I. -I"$include")
level=(-DQUANT_KERNEL_NS=isa_baseline
       -DQUANT_KERNEL_LEVEL=::quant::kernels::IsaLevel::kBaseline
       -DEigen=quant_eigen_isa_baseline)
# One compiler per core; each prints its file's errors and fails alone.
failed=$(mktemp)
if [ $# -gt 0 ]; then files=$(printf '%s\n' "$@"); else files=$(git ls-files 'core/*.cc'); fi
count=$(wc -l <<<"$files")
xargs -P "$(nproc)" -I{} bash -c '
  file={}
  if [ "$file" = core/kernels/level_kernels.cc ]; then shift_flags=("${@:1:3}"); else shift_flags=("${@:4}"); fi
  if ! aarch64-linux-gnu-g++ '"${flags[*]@Q}"' "${shift_flags[@]}" "$file" 2>"$file.cross.log.$$"; then
    head -20 "$file.cross.log.$$" >&2
    echo "$file" >>'"$failed"'
  fi
  rm -f "$file.cross.log.$$"' _ "${level[@]}" "${defines[@]}" <<<"$files"
if [ -s "$failed" ]; then
  echo "check_cross: these do not compile for aarch64:" >&2
  cat "$failed" >&2
  rm -f "$failed"
  exit 1
fi
rm -f "$failed"
echo "check_cross: $count core/ files compile for aarch64 (baseline kernels)"
