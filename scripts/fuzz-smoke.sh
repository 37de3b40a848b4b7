#!/usr/bin/env bash
# fuzz-smoke.sh — build the libFuzzer targets and fuzz each of them for a
# while: fuzz_regex (the regex compiler), fuzz_tokenizer (encode/decode round
# trips), fuzz_schema (the JSON Schema compiler), fuzz_grammar (GBNF grammars), fuzz_structural_tag
# (structural tags), fuzz_gguf (the GGUF
# reader and GGUF vocabularies), fuzz_api (OpenAI request bodies), fuzz_safetensors (the safetensors
# reader), fuzz_batch (batch input files) and fuzz_model (the model loader
# on GGUF files, and a forward pass), one after the other. Exits non-zero if the
# build fails or any fuzzer finds a crash, a leak, a sanitizer report, a
# timeout or an out-of-memory; all run even when one fails.
#
#   scripts/fuzz-smoke.sh [SECONDS] [extra libFuzzer flags...]
#
# SECONDS is per target and defaults to 60 (CI runs `scripts/fuzz-smoke.sh 60`:
# five minutes of fuzzing plus the build). Needs clang with libFuzzer.
# Everything it writes stays under build-fuzz/, for each NAME in regex, schema, grammar,
# structural_tag, tokenizer, gguf, safetensors, api, batch, model:
#   build-fuzz/                    the instrumented build (CC=clang, ASan+UBSan)
#   build-fuzz/corpus-NAME/        working corpus: a copy of fuzz/corpus/NAME,
#                                  grown by the run (the committed seeds are
#                                  never written to)
#   build-fuzz/artifacts-NAME/     crash-*, leak-*, timeout-*, oom-* inputs
#   build-fuzz/fuzz-NAME.log       the fuzzer's log
# To replay one input: build-fuzz/fuzz/fuzz_NAME path/to/input
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
cmake --build "$build" --target fuzz_regex fuzz_schema fuzz_grammar fuzz_structural_tag fuzz_tokenizer fuzz_gguf fuzz_safetensors fuzz_api fuzz_batch fuzz_model -j "$(nproc 2>/dev/null || echo 2)"

# Leak checks on: the library must free everything on every error path.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# fuzz NAME MAX_LEN [libFuzzer flags...]: runs build-fuzz/fuzz/fuzz_NAME for
# $secs seconds; returns non-zero on any finding.
fuzz() {
  local name="$1" max_len="$2"
  shift 2
  local corpus="$build/corpus-$name" artifacts="$build/artifacts-$name" log="$build/fuzz-$name.log"
  mkdir -p "$corpus"
  rm -rf "$artifacts"
  mkdir -p "$artifacts"
  cp "$root"/fuzz/corpus/"$name"/* "$corpus"/

  echo "fuzz-smoke: fuzz_$name for ${secs}s (log: $log)"
  local rc=0 dict=()
  [ -f "$root/fuzz/$name.dict" ] && dict=(-dict="$root/fuzz/$name.dict")
  "$build/fuzz/fuzz_$name" \
    -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    "${dict[@]}" -artifact_prefix="$artifacts/" \
    -print_final_stats=1 "$@" "$corpus" >"$log" 2>&1 || rc=$?

  tail -n 25 "$log"
  local found
  found="$(find "$artifacts" -type f | wc -l)"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    echo "fuzz-smoke: fuzz_$name FAILED (exit $rc, $found artifact(s) in $artifacts)" >&2
    find "$artifacts" -type f -exec ls -l {} + >&2
    return 1
  fi
  echo "fuzz-smoke: fuzz_$name ok"
}

failed=0
fuzz regex 256 "$@" || failed=1
# Schemas are longer than patterns: the seeds go up to 2 KB.
fuzz schema 4096 "$@" || failed=1
# Grammars, GBNF and Lark (fsm/grammar.h).
fuzz grammar 2048 "$@" || failed=1
# Structural tags (fsm/structural_tag.h): the seeds are under 1 KB.
fuzz structural_tag 2048 "$@" || failed=1
# The tokenizer: encode/decode round trips.
fuzz tokenizer 1024 "$@" || failed=1
# GGUF files: the seeds (tests/tokenizer/gguf_seeds.py) are up to 2 KB.
fuzz gguf 8192 "$@" || failed=1
# safetensors files: the seeds are under 1 KB.
fuzz safetensors 4096 "$@" || failed=1
# OpenAI request bodies (the server's parser, prompts, tool calls).
fuzz api 8192 "$@" || failed=1
# Batch input files: JSON Lines of requests.
fuzz batch 8192 "$@" || failed=1
# Model files: the loader and a forward pass (fuzz/model_seeds.py: up to 19 KB).
fuzz model 24576 "$@" || failed=1
if [ "$failed" -ne 0 ]; then
  echo "fuzz-smoke: FAILED" >&2
  exit 1
fi
echo "fuzz-smoke: ok"
