#!/usr/bin/env bash
# Clang's thread-safety analysis over every translation unit that uses the
# project's mutex (core/base/mutex.h): each ABSL_GUARDED_BY member must be
# touched with its mutex held, each ABSL_EXCLUSIVE_LOCKS_REQUIRED function
# called with it. The release build is GCC, which ignores the attributes, so
# this compiles those files once more with clang, syntax only, with the
# flags the build used (from its compile_commands.json).
#
#   scripts/check_thread_safety.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
db="$build/compile_commands.json"
if [ ! -f "$db" ]; then
  echo "check_thread_safety: no $db (configure and build first)" >&2
  exit 2
fi

# The sources that name a Mutex or CondVar, and those that include a header
# that does (whose inline functions are analysed with them).
dirs=(core server worker client common bench tests)
mapfile -t headers < <(
  grep -rlE '\b(Mutex|CondVar)\b' --include='*.h' "${dirs[@]}")
mapfile -t sources < <(
  {
    grep -rlE '\b(Mutex|CondVar)\b' --include='*.cc' "${dirs[@]}"
    printf '#include "%s"\n' "${headers[@]}" |
      grep -rlF -f - --include='*.cc' "${dirs[@]}"
  } | sort -u)

commands=()
for source in "${sources[@]}"; do
  [ -f "$source" ] || continue
  # The first entry (a kernel source is compiled once per level).
  command=$(jq -r --arg f "$PWD/$source" \
      'first(.[] | select(.file == $f) | .command) // empty' "$db")
  [ -n "$command" ] || continue
  # The compiler becomes clang++, the object output a syntax-only pass.
  command="clang++ ${command#* }"
  command=$(sed -E 's/ -o [^ ]+ / /; s/ -c / -fsyntax-only -Wthread-safety -Werror=thread-safety /' <<<"$command")
  commands+=("$command")
done
if [ "${#commands[@]}" -eq 0 ]; then
  echo "check_thread_safety: no translation unit of $db uses core/base/mutex.h" >&2
  exit 1
fi

echo "thread-safety analysis (clang -Wthread-safety) of ${#commands[@]} translation units"
cd "$build"
printf '%s\0' "${commands[@]}" |
  xargs -0 -P "$(nproc)" -I{} bash -c '{}'
echo "thread-safety analysis: no finding"
