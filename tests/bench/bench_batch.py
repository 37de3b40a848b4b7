#!/usr/bin/env python3
"""bench_batch.py — `sieve batch` against the same requests sent one at a time.

    .venv/bin/python tests/bench/bench_batch.py --sieve build-rel2/sieve [--lines 1000] [--sequential 100]

Builds N extraction lines that share one JSON Schema (a person: name, age,
city, from a short generated sentence; greedy, max_tokens 48) and runs:

  batch       `sieve batch` on all N lines (default flags: 16 sequences);
  one by one  `sieve serve` with the same flags, the first --sequential
              lines sent one after the other, each waiting for the last
              (the way a script without batching sends them).

With --online N it measures instead the TTFT of N streamed online requests
on a `sieve serve`, alone and while 32 clients keep batch-priority requests
(X-Sieve-Priority: batch) in flight.

Reports, as markdown on stdout: lines, completion tokens, wall time and
completion tokens/s of each, the batch's compile count (the summary's
"N compiled": must be 1) and its re-check counts (must be all valid), and
checks every answer against the schema with `jsonschema`. The one-by-one
rate is measured on a prefix of the lines: the rate of a sequential run is
steady, and the whole would take N times as long."""
import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "server"))
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 24},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "city": {"type": "string", "maxLength": 24}},
          "required": ["name", "age", "city"], "additionalProperties": False}
FIRST = ["Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Margaret", "Ken", "Frances", "Dennis"]
LAST = ["Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Hamilton", "Thompson", "Allen", "Ritchie"]
CITIES = ["London", "Paris", "Berlin", "Rome", "Madrid", "Vienna", "Lisbon", "Dublin", "Oslo", "Prague"]


def lines(n, seed=1):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        text = (f"{rng.choice(FIRST)} {rng.choice(LAST)} is {rng.randint(18, 90)} years old "
                f"and lives in {rng.choice(CITIES)}.")
        body = {"model": "smol", "max_tokens": 48, "temperature": 0,
                "messages": [{"role": "system", "content": "Extract the person as JSON."},
                             {"role": "user", "content": text}],
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}}}
        out.append({"custom_id": f"doc-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sieve", required=True)
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--sequential", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--online", type=int, default=0,
                    help="also measure the TTFT of this many online requests, alone and beside a batch load")
    a = ap.parse_args()
    if a.online:
        online_ttft(a)
        return
    reqs = lines(a.lines)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        inp, out = Path(d) / "in.jsonl", Path(d) / "out.jsonl"
        inp.write_text("".join(json.dumps(r) + "\n" for r in reqs))
        t0 = time.monotonic()
        r = subprocess.run([a.sieve, "batch", "-m", str(MODEL), "-i", str(inp), "-o", str(out), "--threads",
                            str(a.threads)], capture_output=True, text=True)
        wall = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        got = [json.loads(l) for l in out.read_text().splitlines()]
        assert sorted(g["custom_id"] for g in got) == sorted(q["custom_id"] for q in reqs)
        toks = 0
        for g in got:
            body = g["response"]["body"]
            jsonschema.validate(json.loads(body["choices"][0]["message"]["content"]), SCHEMA)
            toks += body["usage"]["completion_tokens"]
        m = re.search(r"constraints: (\d+) compiled.*?(\d+) valid, (\d+) failed, (\d+) unchecked", r.stderr)
        compiles, valid, failed, unchecked = (int(x) for x in m.groups())
        rows.append(("`sieve batch`", len(got), toks, wall, compiles, f"{valid} / {failed} / {unchecked}"))

    import httpx2 as httpx
    from live import Server
    import os
    os.environ["SIEVE_BIN"] = str(Path(a.sieve).resolve())
    s = Server("--threads", str(a.threads), api_key=None)
    try:
        toks, n = 0, min(a.sequential, len(reqs))
        t0 = time.monotonic()
        with httpx.Client(timeout=600) as c:
            for q in reqs[:n]:
                r = c.post(s.url + "/v1/chat/completions", json=q["body"])
                assert r.status_code == 200, r.text
                body = r.json()
                jsonschema.validate(json.loads(body["choices"][0]["message"]["content"]), SCHEMA)
                toks += body["usage"]["completion_tokens"]
        wall = time.monotonic() - t0
        rows.append(("one at a time (`sieve serve`)", n, toks, wall, None, None))
    finally:
        s.stop()

    print("| run | lines | completion tokens | wall | tokens/s | compiles | re-checked valid / failed / unchecked |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, n, toks, wall, comp, chk in rows:
        print(f"| {name} | {n} | {toks} | {wall:.1f} s | {toks / wall:.1f} | {'' if comp is None else comp} | "
              f"{chk or ''} |")


def online_ttft(a):
    """TTFT of online requests (streamed, one at a time) on a `sieve serve`,
    alone and while 32 clients keep batch-priority requests (the lines
    above, X-Sieve-Priority: batch) in flight: the batch's cost to online
    latency."""
    import os
    import threading
    import httpx2 as httpx
    from live import Server
    os.environ["SIEVE_BIN"] = str(Path(a.sieve).resolve())
    s = Server("--threads", str(a.threads), api_key=None)
    reqs = lines(2000)
    stop = threading.Event()
    done = [0]

    def batch_client(k, prio):
        with httpx.Client(timeout=600) as c:
            i = k
            while not stop.is_set():
                r = c.post(s.url + "/v1/chat/completions", json=reqs[i % len(reqs)]["body"],
                           headers={"X-Sieve-Priority": prio})
                assert r.status_code == 200, r.text
                done[0] += 1
                i += 32

    def measure(n, seed):
        rng = random.Random(seed)
        out = []
        with httpx.Client(timeout=600) as c:
            for i in range(n):
                body = dict(reqs[rng.randrange(len(reqs))]["body"], stream=True)
                t0 = time.monotonic()
                with c.stream("POST", s.url + "/v1/chat/completions", json=body) as r:
                    assert r.status_code == 200
                    first = None
                    for line in r.iter_lines():
                        if first is None and line.startswith("data: ") and '"content"' in line:
                            first = time.monotonic() - t0
                    out.append(first)
                time.sleep(0.2)
        return sorted(out)

    def beside(prio, seed):
        stop.clear()
        ts = [threading.Thread(target=batch_client, args=(k, prio), daemon=True) for k in range(32)]
        for t in ts:
            t.start()
        time.sleep(10)  # the load fills the engine
        xs = measure(a.online, seed)
        stop.set()
        for t in ts:
            t.join(600)
        return xs

    try:
        measure(3, 0)  # warm-up: the schema compiled once
        alone = measure(a.online, 1)
        with_batch = beside("batch", 2)
        batch_done = done[0]
        interrupted = next((ln.split()[-1] for ln in httpx.get(s.url + "/metrics").text.splitlines()
                            if ln.startswith("sieve:batch_steps_interrupted_total")), "?")
        with_online = beside("online", 3)
    finally:
        s.stop()

    def pct(xs, p):
        return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]

    print("| online TTFT | n | p50 | p99 | max |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, xs in (("alone", alone), ("beside 32 batch-priority clients", with_batch),
                     ("beside the same 32 clients at online priority", with_online)):
        print(f"| {name} | {len(xs)} | {pct(xs, 50) * 1000:.0f} ms | {pct(xs, 99) * 1000:.0f} ms | "
              f"{xs[-1] * 1000:.0f} ms |")
    print(f"\nbatch-priority requests completed while measured beside them: {batch_done}; "
          f"batch steps given up for an online request: {interrupted}")


if __name__ == "__main__":
    main()
