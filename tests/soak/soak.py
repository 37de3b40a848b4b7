#!/usr/bin/env python3
"""soak.py — a live `sieve serve` under mixed good and hostile load, on loopback.

    .venv/bin/python tests/soak/soak.py --sieve build/sieve [--seconds 60] [--out report.json]

Runs the default model (models/SmolLM2-135M-Instruct.Q4_1.gguf) on the CPU
and, after a warm-up that compiles the good constraints once:

  phase A (a third of --seconds): 64 concurrent clients, good requests only:
      chat completions constrained by a JSON Schema, tools (tool_choice
      required), a regex or a choice list, streaming and not;
  phase B (the rest): the same 64 clients, plus hostile ones:
      - clients that disconnect mid-stream;
      - a stream of compile bombs (exponential regexes and schemas, each new);
      - malformed JSON bodies, oversized bodies (413), and slowloris
        connections that trickle a header byte at a time;
  drain: SIGTERM while streams run; they must finish, and the process exit 0.

Every good output is validated independently: Python `jsonschema` for
schemas and tool arguments, `re.fullmatch` for the regex, membership for
the choices. It reports (JSON, and a summary on stderr): good requests and
how many failed (must be 0), invalid outputs (must be 0), p50/p99 latency of
cached-constraint requests in phase A and B (B's p99 within 2x A's: the
stated factor by which hostile load may slow them), RSS after the warm-up, after
phase A and at the end (flat under the hostile load: the end within 160 MiB
of phase A's steady state, that is the 64 MiB constraint cache and the 16
MiB memo of sub-automata, which bombs that compile also fill, plus 80 MiB
for the allocator; the server runs with a 128 MiB KV pool, all touched by
the end of phase A), open
file descriptors after the warm-up and at the end (within 8), and the drain. Exits 1 if any check fails. Bounded in time: --seconds plus at
most about a minute of warm-up, idle wait and drain.
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "server"))

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 16},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
          "required": ["name", "age"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                    "unit": {"enum": ["c", "f"]}},
                   "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"], "additionalProperties": False}}}]
REGEX = "[A-Z][a-z]{2,8} [0-9]{1,3}"
CHOICES = ["red", "green", "blue", "yellow"]
SLOWDOWN = 2.0  # the most the hostile load may slow cached-constraint requests (p99)
PROMPTS = ["Describe a person.", "What is the weather in Paris?", "Pick a color.", "Name and number, please.",
           "Add 2 and 3.", "Say something."]


def percentile(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class Stats:
    def __init__(self):
        self.mu = threading.Lock()
        self.good = self.good_failed = self.invalid = 0
        self.lat = {"A": [], "B": []}
        self.hostile = {}
        self.failures = []

    def add_good(self, phase, ok, valid, lat, why=None):
        with self.mu:
            self.good += 1
            if not ok:
                self.good_failed += 1
                if len(self.failures) < 20:
                    self.failures.append(why)
            elif not valid:
                self.invalid += 1
                if len(self.failures) < 20:
                    self.failures.append(why)
            else:
                self.lat[phase].append(lat)

    def add_hostile(self, kind, outcome):
        with self.mu:
            d = self.hostile.setdefault(kind, {})
            d[outcome] = d.get(outcome, 0) + 1


def good_request(rng):
    kind = rng.choice(["schema", "schema", "tools", "regex", "choice"])
    body = {"model": "smol", "messages": [{"role": "user", "content": rng.choice(PROMPTS)}],
            "max_tokens": 48, "temperature": rng.choice([0, 0.7, 1.0]), "seed": rng.randrange(1 << 30),
            "stream": rng.random() < 0.5}
    if kind == "schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
    elif kind == "tools":
        body["tools"] = TOOLS
        body["tool_choice"] = "required"
    elif kind == "regex":
        body["regex"] = REGEX
    else:
        body["choice"] = CHOICES
    return kind, body


def validate(kind, content, calls):
    if kind == "drain":  # free text: only that it finished
        return
    if kind == "schema":
        jsonschema.validate(json.loads(content), SCHEMA)
    elif kind == "tools":
        assert calls, "no tool call"
        byname = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
        for c in calls:
            jsonschema.validate(json.loads(c["arguments"]), byname[c["name"]])
    elif kind == "regex":
        assert re.fullmatch(REGEX, content), content
    else:
        assert content in CHOICES, content


def run_good(httpx, url, headers, rng, kind, body):
    """(ok, valid, seconds, why)."""
    t0 = time.monotonic()
    try:
        if body["stream"]:
            content, calls, finish = "", {}, None
            with httpx.stream("POST", url + "/v1/chat/completions", json=body, headers=headers, timeout=300) as r:
                if r.status_code != 200:
                    r.read()
                    return False, False, 0, f"{kind} stream: {r.status_code} {r.text[:200]}"
                lines = [ln for ln in r.iter_lines() if ln]
            if not lines or lines[-1] != "data: [DONE]":
                return False, False, 0, f"{kind} stream: no [DONE] ({lines[-1:] if lines else 'empty'})"
            for ln in lines[:-1]:
                ch = json.loads(ln[6:])["choices"]
                if not ch:
                    continue
                d = ch[0].get("delta", {})
                content += d.get("content") or ""
                for tc in d.get("tool_calls") or []:
                    c = calls.setdefault(tc["index"], {"name": "", "arguments": ""})
                    fn = tc.get("function") or {}
                    c["name"] += fn.get("name") or ""
                    c["arguments"] += fn.get("arguments") or ""
                finish = ch[0].get("finish_reason") or finish
            calls = [calls[k] for k in sorted(calls)]
        else:
            r = httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=300)
            if r.status_code != 200:
                return False, False, 0, f"{kind}: {r.status_code} {r.text[:200]}"
            msg = r.json()["choices"][0]["message"]
            content = msg.get("content") or ""
            calls = [tc["function"] for tc in msg.get("tool_calls") or []]
    except Exception as e:  # a transport error on a good request is a failure
        return False, False, 0, f"{kind}: {type(e).__name__}: {e}"
    lat = time.monotonic() - t0
    try:
        validate(kind, content, calls)
    except Exception as e:
        return True, False, lat, f"{kind}: invalid output {content[:200]!r} {calls!r}: {e}"
    return True, True, lat, None


def bomb_body(rng):
    n = rng.randrange(18, 40)
    pick = rng.randrange(4)
    msgs = [{"role": "user", "content": "x"}]
    if pick == 0:
        return {"model": "smol", "messages": msgs, "max_tokens": 8, "regex": f"[ab]*a[ab]{{{n}}}" + "c" * rng.randrange(50)}
    if pick == 1:
        pats = [{"pattern": f"^[ab]*{rng.choice('ab')}[ab]{{{rng.randrange(9, 13)}}}$"} for _ in range(3)]
        schema = {"type": "string", "allOf": pats}
    elif pick == 2:
        schema = {"type": "string", "not": {"enum": [f"v-{i:05d}-{rng.randrange(99999)}" for i in range(3000)]},
                  "pattern": "^v-[0-9]{5}-[0-9]+$"}
    else:
        schema = {"type": "string", "pattern": f"^(a|b)*a(a|b){{{n}}}$"}
    return {"model": "smol", "messages": msgs, "max_tokens": 8,
            "response_format": {"type": "json_schema", "json_schema": {"name": "b", "schema": schema}}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sieve", required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.environ["SIEVE_BIN"] = str(Path(a.sieve).resolve())
    import httpx2 as httpx
    from live import Server

    # Memory the server takes by design as it runs: the KV pool's pages (128
    # MiB here, all touched in phase A, since the prefix cache keeps blocks
    # until it needs them), the compiled-constraint cache (64 MiB here) and
    # the compiler's memo of sub-automata (16 MiB here), which bombs that
    # compile also fill. Small bounds make a flat RSS a meaningful check.
    server = Server("--max-body-bytes", str(1 << 20), "--compile-timeout-ms", "2000", "--max-queue", "512",
                    "--drain-timeout", "60", "--constraint-cache-mb", "64", "--dfa-memo-mb", "16", "--kv-memory-mb", "128", "--max-model-len", "2048",
                    api_key=None)
    url, headers = server.url, {}
    pid = server.proc.pid
    st = Stats()
    report = {"seconds": a.seconds, "clients": a.clients}

    def rss():
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def fds():
        return len(os.listdir(f"/proc/{pid}/fd"))

    ok = True
    try:
        # warm-up: each good constraint compiled once
        rng = random.Random(a.seed)
        for kind in ["schema", "tools", "regex", "choice"]:
            while True:
                k, body = good_request(rng)
                if k == kind:
                    break
            body["stream"] = False
            r = run_good(httpx, url, headers, rng, k, body)
            assert r[0] and r[1], r
        server.wait_idle()
        report["rss_start"], report["fds_start"] = rss(), fds()

        phase = {"name": "A"}
        stop_all = threading.Event()
        t_end_a = time.monotonic() + a.seconds / 3
        t_end = time.monotonic() + a.seconds

        def good_client(i):
            rng = random.Random(a.seed * 1000 + i)
            while not stop_all.is_set():
                kind, body = good_request(rng)
                ph = phase["name"]
                okk, valid, lat, why = run_good(httpx, url, headers, rng, kind, body)
                st.add_good(ph, okk, valid, lat, why)

        def disconnector(i):
            rng = random.Random(7000 + i)
            while not stop_all.is_set():
                body = {"model": "smol", "messages": [{"role": "user", "content": "Tell a long story."}],
                        "max_tokens": 400, "stream": True, "temperature": 1.0}
                if rng.random() < 0.5:
                    body["response_format"] = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
                try:
                    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60) as r:
                        n = 0
                        for line in r.iter_lines():
                            n += bool(line)
                            if n >= rng.randrange(1, 6):
                                break
                    st.add_hostile("disconnect", "closed")
                except Exception as e:
                    st.add_hostile("disconnect", type(e).__name__)

        def bomber(i):
            rng = random.Random(9000 + i)
            while not stop_all.is_set():
                try:
                    r = httpx.post(url + "/v1/chat/completions", json=bomb_body(rng), timeout=120)
                    st.add_hostile("bomb", str(r.status_code))
                except Exception as e:
                    st.add_hostile("bomb", type(e).__name__)

        def malformed(i):
            rng = random.Random(11000 + i)
            while not stop_all.is_set():
                pick = rng.randrange(3)
                try:
                    if pick == 0:
                        r = httpx.post(url + "/v1/chat/completions", content=b'{"model": "smol", "messages": [',
                                       headers={"Content-Type": "application/json"}, timeout=30)
                    elif pick == 1:
                        big = {"model": "smol", "messages": [{"role": "user", "content": "x" * (3 << 19)}]}
                        r = httpx.post(url + "/v1/chat/completions", json=big, timeout=30)
                    else:
                        r = httpx.post(url + "/v1/chat/completions", content=bytes(rng.randrange(256) for _ in range(64)),
                                       timeout=30)
                    st.add_hostile(["malformed", "oversized", "garbage"][pick], str(r.status_code))
                except Exception as e:
                    st.add_hostile(["malformed", "oversized", "garbage"][pick], type(e).__name__)
                time.sleep(0.05)

        def slowloris(i):
            while not stop_all.is_set():
                try:
                    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
                    for b in b"Content-Type: application/json\r\nX-Slow: " + b"a" * 200:
                        if stop_all.is_set():
                            break
                        s.sendall(bytes([b]))
                        time.sleep(0.25)
                    s.close()
                    st.add_hostile("slowloris", "closed")
                except Exception as e:
                    st.add_hostile("slowloris", type(e).__name__)

        threads = [threading.Thread(target=good_client, args=(i,), daemon=True) for i in range(a.clients)]
        for t in threads:
            t.start()
        while time.monotonic() < t_end_a:
            time.sleep(0.2)
        phase["name"] = "B"
        # The steady state without hostile load: the KV pool's pages and the
        # caches are touched by now; growth from here is the hostile load's.
        report["rss_after_A"] = rss()
        hostile = ([threading.Thread(target=disconnector, args=(i,), daemon=True) for i in range(4)] +
                   [threading.Thread(target=bomber, args=(i,), daemon=True) for i in range(3)] +
                   [threading.Thread(target=malformed, args=(i,), daemon=True) for i in range(2)] +
                   [threading.Thread(target=slowloris, args=(i,), daemon=True) for i in range(8)])
        for t in hostile:
            t.start()
        report["fds_peak"] = 0
        report["rss_timeline_mib"] = []
        last = 0
        while time.monotonic() < t_end:
            report["fds_peak"] = max(report["fds_peak"], fds())
            if time.monotonic() - last >= 5:
                last = time.monotonic()
                report["rss_timeline_mib"].append(rss() >> 20)
            time.sleep(0.5)
        stop_all.set()
        for t in threads + hostile:
            t.join(300)
        m = server.wait_idle(timeout=60)
        time.sleep(1.0)
        report["rss_end"], report["fds_end"] = rss(), fds()
        report["compiles_cancelled"] = m.get('sieve:constraint_compiles_cancelled_total{model_name="smol"}')
        report["compiles_refused"] = m.get('sieve:constraint_compiles_refused_total{model_name="smol"}')
        report["constraint_cache_mib_end"] = (m.get('sieve:constraint_cache_bytes{model_name="smol"}') or 0) / 2**20
        report["dfa_memo_mib_end"] = (m.get('sieve:dfa_memo_bytes{model_name="smol"}') or 0) / 2**20

        # drain: SIGTERM with streams in flight
        drained = []

        def stream_one(i):
            body = {"model": "smol", "messages": [{"role": "user", "content": "Count."}], "max_tokens": 40,
                    "stream": True, "temperature": 1.0, "seed": i}
            r = run_good(httpx, url, headers, random.Random(i), "drain", body | {"stream": True})
            drained.append(r[0])

        ds = [threading.Thread(target=stream_one, args=(i,)) for i in range(8)]
        for t in ds:
            t.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        for t in ds:
            t.join(120)
        try:
            rc = server.proc.wait(90)
        except Exception:
            rc = None
        report["drain"] = {"in_flight": len(ds), "finished": sum(drained), "exit_code": rc,
                           "exit_seconds": round(time.monotonic() - t0, 2)}
    finally:
        server.stop(signal.SIGKILL)

    report["good_requests"] = st.good
    report["good_failed"] = st.good_failed
    report["invalid_outputs"] = st.invalid
    report["failures"] = st.failures
    report["hostile"] = st.hostile
    for ph in ("A", "B"):
        xs = st.lat[ph]
        report[f"latency_{ph}"] = {"n": len(xs), "p50": percentile(xs, 50), "p99": percentile(xs, 99),
                                   "mean": statistics.mean(xs) if xs else None}
    checks = {
        "no good request failed": st.good_failed == 0,
        "no invalid output": st.invalid == 0,
        "good requests ran in both phases": bool(st.lat["A"]) and bool(st.lat["B"]),
        "hostile load ran": sum(sum(d.values()) for d in st.hostile.values()) > 0,
        f"cached-constraint p99 under hostile load within {SLOWDOWN}x": bool(st.lat["A"]) and bool(st.lat["B"]) and
        percentile(st.lat["B"], 99) <= SLOWDOWN * percentile(st.lat["A"], 99),
        "RSS flat under hostile load (within 160 MiB)": report["rss_end"] - report["rss_after_A"] <= (160 << 20),
        "open fds flat (within 8)": report["fds_end"] - report["fds_start"] <= 8,
        "drain: streams in flight finished": report["drain"]["finished"] == report["drain"]["in_flight"],
        "drain: exit 0": report["drain"]["exit_code"] == 0,
    }
    report["checks"] = checks
    ok = all(checks.values())
    text = json.dumps(report, indent=1)
    if a.out:
        Path(a.out).write_text(text + "\n")
    la, lb = report["latency_A"], report["latency_B"]
    print(f"soak: {st.good} good requests, {st.good_failed} failed, {st.invalid} invalid; "
          f"cached-constraint latency p50/p99 {la['p50']:.3f}/{la['p99']:.3f} s without hostile load, "
          f"{lb['p50']:.3f}/{lb['p99']:.3f} s with it; RSS {report['rss_start'] >> 20} (warm-up) -> "
          f"{report['rss_after_A'] >> 20} (phase A) -> {report['rss_end'] >> 20} MiB (end); "
          f"fds {report['fds_start']} -> {report['fds_end']} (peak {report['fds_peak']}); drain {report['drain']}; "
          f"hostile {st.hostile}", file=sys.stderr)
    for name, good in checks.items():
        print(f"soak: {'ok  ' if good else 'FAIL'} {name}", file=sys.stderr)
    if st.failures:
        print("soak: failures: " + json.dumps(st.failures[:5]), file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
