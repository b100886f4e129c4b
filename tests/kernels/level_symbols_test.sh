#!/usr/bin/env bash
# Checks linked programs for instructions outside their level: every
# function that uses AVX or AVX-512 (a VEX/EVEX mnemonic, a ymm/zmm or mask
# register) must belong to the x86-64-v3 or -v4 kernels (the namespaces
# quant::kernels::isa_v3/isa_v4 and Eigen's per-level copies
# quant_eigen_isa_v3/v4), AVX-512 only to v4; and each of those levels
# must really contain such code (its -march took effect). A failure means
# an inline function or template instantiated in a kernel TU leaked into
# code every CPU runs, or the other way round.
#
#   level_symbols_test.sh PROGRAM...
set -euo pipefail
status=0
for program in "$@"; do
  if [ ! -x "$program" ]; then
    echo "FAIL: $program is not an executable" >&2
    status=1
    continue
  fi
  report=$(objdump -d --no-show-raw-insn -C "$program" | awk '
    function level_of(name) {
      if (name ~ /isa_v4/) return 4
      if (name ~ /isa_v3/) return 3
      return 2
    }
    function finish() {
      if (fn == "") return
      lvl = level_of(fn)
      if (uses512 && lvl < 4) { printf "AVX-512 outside v4: %s\n", fn; bad++ }
      else if (usesvex && lvl < 3) { printf "AVX outside v3/v4: %s\n", fn; bad++ }
      if (lvl == 4 && uses512) v4_512++
      if (lvl == 3 && usesvex) v3_vex++
      if (fn ~ /isa_v2/) v2_fns++
    }
    /^[0-9a-f]+ <.*>:$/ {
      finish()
      fn = substr($0, index($0, "<") + 1)
      fn = substr(fn, 1, length(fn) - 2)
      uses512 = 0; usesvex = 0
      next
    }
    /^ +[0-9a-f]+:\t/ {
      split($0, parts, "\t")
      insn = parts[2]
      if (insn ~ /%zmm|\{%k[0-7]\}|%k[0-7]/) uses512 = 1
      if (insn ~ /^v[a-z]/ || insn ~ /%ymm/) usesvex = 1
    }
    END {
      finish()
      printf "SUMMARY %d %d %d %d\n", bad, v4_512, v3_vex, v2_fns
    }')
  summary=$(grep '^SUMMARY' <<<"$report")
  read -r _ bad v4 v3 v2 <<<"$summary"
  grep -v '^SUMMARY' <<<"$report" | head -20 >&2 || true
  echo "$program: $bad function(s) outside their level; v4 functions with AVX-512: $v4; v3 functions with AVX: $v3; v2 kernel functions: $v2"
  if [ "$bad" -ne 0 ] || [ "$v4" -eq 0 ] || [ "$v3" -eq 0 ] || [ "$v2" -eq 0 ]; then
    echo "FAIL: $program" >&2
    status=1
  fi
done
exit $status
