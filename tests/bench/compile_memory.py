#!/usr/bin/env python3
"""compile_memory.py — peak memory of one schema compilation.

Runs `sieve compile --schema FILE` once per MaskBench schema (one process
each, so the process's peak resident set, read with os.wait4, is that one
compilation's plus the binary's small baseline, which the report also
gives from a compile of `{}`), and prints the distribution of peak RSS and
every schema above --limit-mb (default 256, issue 14's target), as
markdown; --out writes one JSON object a line.

Reproduce (Release build, 2 jobs):
    .venv/bin/python tests/bench/compile_memory.py --sieve build-rel/sieve \
        --data ../shared/data/maskbench --jobs 2 [--sieve-arg=--allow-unknown-formats]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def peak_rss_kb(argv, timeout_s):
    """Runs argv; returns (exit status, peak RSS in KiB, stdout), killing it
    after timeout_s seconds (status None then)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    out = b""
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            out = p.stdout.read()
            p.stdout.close()
            code = os.waitstatus_to_exitcode(status)
            return code, ru.ru_maxrss, out.decode("utf-8", "replace")
        if time.monotonic() > deadline:
            p.kill()
            _, status, ru = os.wait4(p.pid, 0)
            p.stdout.close()
            return None, ru.ru_maxrss, ""
        time.sleep(0.002)


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sieve", default="build-rel/sieve")
    ap.add_argument("--data", default="../shared/data/maskbench")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout-s", type=float, default=60)
    ap.add_argument("--limit-mb", type=float, default=256)
    ap.add_argument("--sieve-arg", action="append", default=[])
    ap.add_argument("--out")
    a = ap.parse_args()
    files = sorted(Path(a.data).glob("*.json"))
    if not files:
        sys.exit(f"compile_memory: no schemas in {a.data}")
    tmp = tempfile.mkdtemp()

    def one(i_f):
        i, f = i_f
        schema = json.load(open(f))["schema"]
        path = os.path.join(tmp, f"{i}.json")
        with open(path, "w") as w:
            json.dump(schema, w)
        code, kb, out = peak_rss_kb([a.sieve, "compile", "--schema", path, *a.sieve_arg], a.timeout_s)
        os.unlink(path)
        kind = "ok" if code == 0 else "timeout" if code is None else "error"
        err = ""
        if code == 2:
            try:
                err = json.loads(out.strip().splitlines()[-1])["error"].get("type", "")
            except Exception:  # noqa: BLE001
                err = "?"
        return {"file": f.name, "rss_mb": kb / 1024, "outcome": kind, "error_type": err}

    base_path = os.path.join(tmp, "base.json")
    with open(base_path, "w") as w:
        w.write("{}")
    _, base_kb, _ = peak_rss_kb([a.sieve, "compile", "--schema", base_path], 30)
    t0 = time.time()
    with ThreadPoolExecutor(a.jobs) as ex:
        recs = list(ex.map(one, enumerate(files)))
    if a.out:
        with open(a.out, "w") as w:
            for r in recs:
                w.write(json.dumps(r) + "\n")
    rss = [r["rss_mb"] for r in recs]
    print(f"# Peak RSS of one compilation: {len(recs)} schemas, {time.time() - t0:.0f} s, sieve {a.sieve} {' '.join(a.sieve_arg)}\n")
    print(f"Baseline (`{{}}`): {base_kb / 1024:.1f} MiB.\n")
    print("| p50 | p90 | p99 | p99.9 | max | over the limit |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    over = [r for r in recs if r["rss_mb"] > a.limit_mb]
    print(f"| {pct(rss, .5):.1f} MiB | {pct(rss, .9):.1f} MiB | {pct(rss, .99):.1f} MiB | {pct(rss, .999):.1f} MiB | "
          f"{max(rss):.1f} MiB | {len(over)} (> {a.limit_mb:g} MiB) |\n")
    by = {}
    for r in recs:
        k = r["outcome"] + (":" + r["error_type"] if r["error_type"] else "")
        by[k] = by.get(k, 0) + 1
    print("Outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())) + "\n")
    if over:
        print("| schema | peak MiB | outcome |\n| --- | ---: | --- |")
        for r in sorted(over, key=lambda r: -r["rss_mb"]):
            print(f"| {r['file']} | {r['rss_mb']:.0f} | {r['outcome']} {r['error_type']} |")


if __name__ == "__main__":
    main()
