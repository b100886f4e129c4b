#!/usr/bin/env bash
# Each program's --help lists its own flags: pairs of PROGRAM FLAG, where
# FLAG is one the help must name. absl's --help once said "No flags
# matched" for programs whose main file is not named after the program.
set -euo pipefail
status=0
while [ $# -ge 2 ]; do
  program=$1 flag=$2
  shift 2
  help=$("$program" --help 2>&1 || true)
  if grep -q "No flags matched" <<<"$help"; then
    echo "FAIL: $(basename "$program") --help lists none of its flags"
    status=1
  elif ! grep -q -- "--$flag " <<<"$help"; then
    echo "FAIL: $(basename "$program") --help does not list --$flag:"
    echo "$help" | head -20
    status=1
  else
    echo "ok: $(basename "$program") --help lists --$flag"
  fi
done
exit $status
