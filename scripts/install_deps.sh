#!/usr/bin/env bash
# Installs the Debian 12 packages this project builds and tests with.
# Does nothing when they are all present; needs root or sudo otherwise.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  clang clang-format libclang-rt-14-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev prometheus-cpp-dev prometheus
  libgtest-dev libgmock-dev libbenchmark-dev
  libsqlite3-dev nlohmann-json3-dev libyaml-dev libssl-dev
  libpcre2-dev libutf8proc-dev ccache
  # metrics/: the HTTP server of /metrics and quantd's report pages.
  libcivetweb-dev
  # scripts/check_thread_safety.sh reads compile_commands.json with it.
  jq
  # The benchmarks' SGEMM ceiling (bench/ceiling): loaded with dlopen,
  # nothing links against it.
  libopenblas0-serial
  # tests/report: report.html is checked in a real browser (headless).
  chromium
  # tests/service/netns_e2e_test: workers in their own network namespaces
  # (ip netns, veth pairs).
  iproute2
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install_deps: missing packages (${missing[*]}) and not root, no sudo" >&2
    exit 1
  fi
fi

echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
