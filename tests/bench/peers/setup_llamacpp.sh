#!/usr/bin/env bash
# setup_llamacpp.sh: build llama-cpp-python from its PyPI source distribution
# into its own virtual environment at the repository's .venv-llamacpp/ (or at
# $1), for tests/bench/bench_cpu_model.py. Idempotent: a venv that already
# imports the pinned version is kept. Needs Python >= 3.8, cmake, gcc and g++,
# and PyPI; the build compiles llama.cpp (about 200 C/C++ files) with
# -march=native, so the result is for this machine only. Never run in CI.
#
#   tests/bench/peers/setup_llamacpp.sh            # .venv-llamacpp/
#   LLAMA_CPP_PYTHON_VERSION=0.3.36 JOBS=2 tests/bench/peers/setup_llamacpp.sh /tmp/venv
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VENV="${1:-$ROOT/.venv-llamacpp}"
PYTHON="${PYTHON:-python3}"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
JOBS="${JOBS:-2}"

for tool in cmake gcc g++; do
  command -v "$tool" >/dev/null || { echo "setup_llamacpp.sh: $tool is needed" >&2; exit 1; }
done
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
have="$("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("llama-cpp-python"))' 2>/dev/null || true)"
if [ "$have" = "$VERSION" ] && "$VENV/bin/python" -c 'import llama_cpp' 2>/dev/null; then
  echo "llama-cpp-python $VERSION already in $VENV"
  exit 0
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# From source (--no-binary), so the CPU backend is compiled for this machine.
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON}" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
  nice -n 10 "$VENV/bin/python" -m pip install --no-binary llama-cpp-python --no-cache-dir \
  "llama-cpp-python==$VERSION"
"$VENV/bin/python" - <<'PY'
from importlib.metadata import version
import llama_cpp
print("llama.cpp venv ready: llama-cpp-python", version("llama-cpp-python"),
      "| system info:", llama_cpp.llama_print_system_info().decode().strip())
PY
