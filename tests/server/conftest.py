"""Session fixtures: one live server (tests/server/live.py) and its client."""
import pytest

from live import Server


@pytest.fixture(scope="session")
def server():
    s = Server("--max-body-bytes", "65536", "--max-num-seqs", "16")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def client(server):
    return server.client()
