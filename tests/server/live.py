"""A live `sieve serve` for the server tests, and the real `openai` client.

(conftest.py makes the session fixtures from this module.)

SIEVE_BIN names the sieve binary (make test sets it). The server runs on the
default model (models/SmolLM2-135M-Instruct.Q4_1.gguf, fetched by
scripts/fetch-model.sh) on the CPU backend, on a free port; it prints
"listening on http://HOST:PORT" on stderr when ready.
"""
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx2 as httpx
import openai

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
API_KEY = "sieve-test-key"
NAME = "smol"


def sieve_bin():
    b = os.environ.get("SIEVE_BIN")
    assert b and os.access(b, os.X_OK), "SIEVE_BIN must name the sieve binary"
    return b


class Server:
    """A sieve serve subprocess; its stderr is collected in self.log."""

    def __init__(self, *args, api_key=API_KEY, model=MODEL):
        assert Path(model).is_file(), f"{model} is missing: scripts/fetch-model.sh fetches it"
        cmd = [sieve_bin(), "serve", "-m", str(model), "--port", "0", "--served-model-name", NAME,
               "--threads", "2", "--device", "cpu"]
        if api_key:
            cmd += ["--api-key", api_key]
        cmd += list(args)
        self.api_key = api_key
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        self.log = []
        self.port = None
        ready = threading.Event()

        def reader():
            for line in self.proc.stderr:
                line = line.decode(errors="replace")
                self.log.append(line)
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=reader, daemon=True).start()
        ready.wait(120)
        assert self.port, "sieve serve did not start:\n" + "".join(self.log)
        self.url = f"http://127.0.0.1:{self.port}"

    def client(self, **kw):
        kw.setdefault("max_retries", 0)
        kw.setdefault("timeout", 300)
        return openai.OpenAI(base_url=self.url + "/v1", api_key=kw.pop("api_key", self.api_key or "none"), **kw)

    def headers(self):
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def post(self, path, body, **kw):
        return httpx.post(self.url + path, json=body, headers=self.headers(), timeout=300, **kw)

    def metrics(self):
        text = httpx.get(self.url + "/metrics", timeout=30).text
        out = {}
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            key, val = line.rsplit(" ", 1)
            out[key] = float(val)
        return out

    def metric(self, name, **labels):
        """The value of sieve:NAME{model_name=..., labels...}."""
        lab = ",".join([f'model_name="{NAME}"'] + [f'{k}="{v}"' for k, v in labels.items()])
        return self.metrics()[f"sieve:{name}{{{lab}}}"]

    def wait_idle(self, timeout=30):
        """Until no request runs or waits and no KV block is held; returns the last metrics."""
        end = time.time() + timeout
        while True:
            m = self.metrics()
            lab = f'{{model_name="{NAME}"}}'
            if (m[f"sieve:num_requests_running{lab}"] == 0 and m[f"sieve:num_requests_waiting{lab}"] == 0
                    and m[f"sieve:batch_num_requests_running{lab}"] == 0
                    and m[f"sieve:batch_num_requests_waiting{lab}"] == 0
                    and m[f"sieve:kv_cache_usage_perc{lab}"] == 0):
                return m
            if time.time() > end:
                return m
            time.sleep(0.1)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
