#!/usr/bin/env bash
# run_regex_corpus.sh — the regex DFA against PCRE2 on every regex in the
# benchmark JSON Schemas (MaskBench and the JSON-Schema-Test-Suite).
#
# Usage: tests/extended/run_regex_corpus.sh BUILD_DIR [DATA_DIR]
#   BUILD_DIR  a configured and built tree (holds tests/test_regex_pcre2)
#   DATA_DIR   the shared data folder; default ../shared/data from the repo root
# Writes BUILD_DIR/extended/patterns.jsonl, then runs
# BUILD_DIR/tests/test_regex_pcre2 --patterns on it. Fails loudly, never
# skips, when the data or the test binary is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BUILD_DIR [DATA_DIR]" >&2
  exit 2
fi
build="$1"
data="${2:-$root/../shared/data}"

if [ ! -d "$data" ]; then
  echo "run_regex_corpus.sh: data folder $data is missing; this run needs the benchmark data" >&2
  exit 1
fi
bin="$build/tests/test_regex_pcre2"
if [ ! -x "$bin" ]; then
  echo "run_regex_corpus.sh: $bin is missing; build first (cmake --build $build)" >&2
  exit 1
fi

python="${PYTHON:-python3}"
if [ -x "$root/.venv/bin/python" ] && [ -z "${PYTHON:-}" ]; then python="$root/.venv/bin/python"; fi

mkdir -p "$build/extended"
patterns="$build/extended/patterns.jsonl"
"$python" "$root/tests/extended/extract_patterns.py" "$data" "$patterns"
exec "$bin" --patterns "$patterns"
