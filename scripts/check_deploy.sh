#!/usr/bin/env bash
# Checks deploy/prometheus with promtool: the scrape config (and the rule
# files it names), the alert rules, and their unit tests. Exits non-zero on
# the first failure. promtool comes with Debian's prometheus package
# (scripts/install_deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null 2>&1; then
  echo "check_deploy: promtool not found (apt-get install prometheus)" >&2
  exit 1
fi

promtool check config deploy/prometheus/prometheus.yml
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts_test.yml
echo "check_deploy: OK"
