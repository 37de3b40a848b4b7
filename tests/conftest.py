"""What every test under tests/ can count on, so that one file runs alone:

    make build && .venv/bin/python -m pytest -q tests/server/test_openai.py

- The tools the tests drive default to the build folder: SIEVE_BIN to
  build/sieve, and API_CLI_BIN, LOGITS_CLI_BIN, DEQUANT_CLI_BIN,
  SAMPLE_CLI_BIN, TOK_CLI_BIN, SAMPLE_FORMAT_BIN to build/tests/<tool>
  (the names `make test` sets; a variable already set wins, so other builds
  are tested the same way). A tool that is not built is left unset, and the
  tests that need it fail with their own message.
- The default model (models/SmolLM2-135M-Instruct.Q4_1.gguf) is fetched
  first (scripts/fetch-model.sh, which checks its SHA-256) when a test of
  tests/server or tests/model is collected and the file is missing.
"""
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("SIEVE_BUILD", ROOT / "build"))
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

TOOLS = {"SIEVE_BIN": BUILD / "sieve", "API_CLI_BIN": BUILD / "tests" / "api_cli",
         "LOGITS_CLI_BIN": BUILD / "tests" / "logits_cli", "DEQUANT_CLI_BIN": BUILD / "tests" / "dequant_cli",
         "SAMPLE_CLI_BIN": BUILD / "tests" / "sample_cli", "TOK_CLI_BIN": BUILD / "tests" / "tok_cli",
         "SAMPLE_FORMAT_BIN": BUILD / "tests" / "sample_format"}
for var, path in TOOLS.items():
    if not os.environ.get(var) and os.access(path, os.X_OK):
        os.environ[var] = str(path)


def pytest_collection_finish(session):
    needs_model = any(Path(str(item.fspath)).parent.name in ("server", "model") for item in session.items)
    if needs_model and not MODEL.is_file():
        r = subprocess.run([str(ROOT / "scripts" / "fetch-model.sh")], capture_output=True, text=True)
        if r.returncode != 0:
            print("conftest: scripts/fetch-model.sh failed (the tests that need the model will fail):\n" + r.stderr)
