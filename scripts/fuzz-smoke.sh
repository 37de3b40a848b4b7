#!/usr/bin/env bash
# fuzz-smoke.sh — build the libFuzzer targets and fuzz the regex compiler for
# a while. Exits non-zero if the build fails or the fuzzer finds a crash, a
# leak, a sanitizer report, a timeout or an out-of-memory.
#
#   scripts/fuzz-smoke.sh [SECONDS] [extra libFuzzer flags...]
#
# SECONDS defaults to 60 (CI runs `scripts/fuzz-smoke.sh 60`). Needs clang
# with libFuzzer. Everything it writes stays under build-fuzz/:
#   build-fuzz/                    the instrumented build (CC=clang, ASan+UBSan)
#   build-fuzz/corpus-regex/       working corpus: a copy of fuzz/corpus/regex,
#                                  grown by the run (the committed seeds are
#                                  never written to)
#   build-fuzz/artifacts-regex/    crash-*, leak-*, timeout-*, oom-* inputs
#   build-fuzz/fuzz-regex.log      the fuzzer's log
# To replay one input: build-fuzz/fuzz/fuzz_regex path/to/input
set -euo pipefail

secs="${1:-60}"
shift || true
case "$secs" in
  '' | *[!0-9]*) echo "usage: $0 [SECONDS] [libFuzzer flags...]" >&2; exit 64 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-fuzz"
cc="${CC:-clang}"
case "$(basename "$cc")" in
  clang*) ;;
  *) echo "fuzz-smoke: CC=$cc is not clang; libFuzzer needs clang" >&2; exit 2 ;;
esac

CC="$cc" cmake -B "$build" -S "$root" -DSV_CUDA=OFF -DSV_FUZZ=ON \
  -DSV_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzz_regex -j "$(nproc 2>/dev/null || echo 2)"

corpus="$build/corpus-regex"
artifacts="$build/artifacts-regex"
log="$build/fuzz-regex.log"
mkdir -p "$corpus"
rm -rf "$artifacts"
mkdir -p "$artifacts"
cp "$root"/fuzz/corpus/regex/* "$corpus"/

# Leak checks on: the library must free everything on every error path.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

echo "fuzz-smoke: fuzz_regex for ${secs}s (log: $log)"
set +e
"$build/fuzz/fuzz_regex" \
  -max_total_time="$secs" -max_len=256 -timeout=10 -rss_limit_mb=2048 \
  -dict="$root/fuzz/regex.dict" -artifact_prefix="$artifacts/" \
  -print_final_stats=1 "$@" "$corpus" >"$log" 2>&1
rc=$?
set -e

tail -n 25 "$log"
found="$(find "$artifacts" -type f | wc -l)"
if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
  echo "fuzz-smoke: FAILED (exit $rc, $found artifact(s) in $artifacts)" >&2
  find "$artifacts" -type f -exec ls -l {} + >&2
  exit 1
fi
echo "fuzz-smoke: ok"
