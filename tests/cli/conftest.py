import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def sieve():
    path = os.environ.get("SIEVE_BIN", str(ROOT / "build" / "sieve"))
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"sieve binary not found at {path}: build first (make build)")

    def run(*args, stdin=None, timeout=60):
        return subprocess.run([path, *args], input=stdin, capture_output=True, text=True, timeout=timeout)

    return run
