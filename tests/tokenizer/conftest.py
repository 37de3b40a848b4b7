"""Fixtures for the tokenizer tests.

TOK_CLI_BIN names the tok_cli binary (default build/tests/tok_cli) and
SIEVE_SHARED_DATA the shared data folder (default ../shared/data). The parity
tests need the Hugging Face tokenizer.json files there and fail, not skip,
when they are missing.
"""
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import make_corpus  # noqa: E402


@pytest.fixture(scope="session")
def tok_cli():
    path = pathlib.Path(os.environ.get("TOK_CLI_BIN", ROOT / "build" / "tests" / "tok_cli"))
    if not path.is_file():
        pytest.fail("tok_cli not found at %s: build it (cmake --build build) or set TOK_CLI_BIN" % path)
    return str(path)


@pytest.fixture(scope="session")
def shared_data():
    path = pathlib.Path(os.environ.get("SIEVE_SHARED_DATA", ROOT.parent / "shared" / "data"))
    if not (path / "tokenizers").is_dir():
        pytest.fail("%s/tokenizers is missing: the parity tests need the shared data "
                    "(Hugging Face tokenizer.json files; see ../shared/data/README.md)" % path)
    return path


@pytest.fixture(scope="session")
def corpus():
    recs = make_corpus.generate()
    assert sum(len(r.encode()) for r in recs) >= 1 << 20
    return recs


@pytest.fixture(scope="session")
def code_points():
    return make_corpus.code_point_records()
