#!/usr/bin/env bash
# The image's health check: succeeds when something accepts a TCP connection
# at QUANT_HEALTH_ADDR (HOST:PORT, default 127.0.0.1:50051, quantd's gRPC
# port). Workers serve no gRPC, so their containers point it at their
# --metrics_listen port. The image has no gRPC health client; bash's
# /dev/tcp needs nothing else.
set -euo pipefail
addr="${QUANT_HEALTH_ADDR:-127.0.0.1:50051}"
host="${addr%:*}"
port="${addr##*:}"
if [[ -z "$host" || ! "$port" =~ ^[0-9]+$ ]]; then
  echo "healthcheck: QUANT_HEALTH_ADDR must be HOST:PORT, got '$addr'" >&2
  exit 2
fi
# A connection that hangs counts as unhealthy instead of blocking forever.
exec timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' healthcheck "$host" "$port"
