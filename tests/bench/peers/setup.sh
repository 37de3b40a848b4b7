#!/usr/bin/env bash
# setup.sh: create the peers' own virtual environment (llguidance, XGrammar and
# PyTorch for run_peer.py) at the repository's .venv-peers/, or at $1.
# Needs Python >= 3.10 and PyPI; about 5.6 GB of disk. Never run in CI.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VENV="${1:-$ROOT/.venv-peers}"
PYTHON="${PYTHON:-python3}"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "setup.sh: Python >= 3.10 needed")'
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -r "$ROOT/tests/bench/peers/requirements.txt"
"$VENV/bin/python" - <<'PY'
from importlib.metadata import version
import llguidance, xgrammar, tokenizers  # noqa: F401  (the imports must work)
print("peers venv ready:", ", ".join(f"{p} {version(p)}" for p in ("llguidance", "xgrammar", "tokenizers", "torch")))
PY
