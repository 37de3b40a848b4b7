#!/usr/bin/env python3
"""compile_bounds.py — every MaskBench schema through `sieve compile` under hard bounds.

    .venv/bin/python tests/reliability/compile_bounds.py --sieve build/sieve \\
        [--data ../shared/data] [--stride 1] [--jobs 2] [--out report.json]

Each schema of ../shared/data/maskbench (every --stride-th file, sorted by
name) is compiled by its own `sieve compile --schema FILE
--allow-unknown-formats --max-memory 268435456 --compile-timeout-ms 5000`
process, under an address-space limit (RLIMIT_AS) of 2 GiB. A compile may
succeed or end in a budget or timeout error (the schema is too big for
these settings: that is what budgets are for); it FAILS the run when

  - the process crashes, is killed, or ends with any other error type than
    the schema's own (syntax, unsupported, empty) or a budget/timeout;
  - its wall time exceeds 5.5 s (the time budget plus 10%);
  - its peak RSS exceeds 256 MiB (the default budget, --max-memory) plus the baseline (the RSS of compiling
    {"type": "string"}, measured first).

It prints the distribution (wall time and peak RSS percentiles, the
outcomes, the worst overshoot of time and memory relative to the budgets)
and writes it as JSON with --out. `make test-extended` runs every 19th file
(413 schemas, a minute or two); `make test-compile-bounds` runs all 7,837
(about 20 minutes on 2 cores).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MAX_MEMORY = 256 << 20
TIMEOUT_MS = 5000
WALL_LIMIT_S = TIMEOUT_MS / 1000 * 1.1
ADDRESS_SPACE = 2 << 30
OWN_ERRORS = {"syntax", "unsupported", "empty"}
BOUND_ERRORS = {"budget", "timeout"}


def limit_as():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run_with_rss(sieve: str, schema_text: str, max_memory: int = MAX_MEMORY) -> dict:
    """One `sieve compile` under the bounds: outcome, wall time, peak RSS (wait4's ru_maxrss)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(schema_text)
        path = f.name
    try:
        cmd = [sieve, "compile", "--schema", path, "--allow-unknown-formats", "--max-memory", str(max_memory),
               "--compile-timeout-ms", str(TIMEOUT_MS)]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit_as)
        out = p.stdout.read()
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    finally:
        os.unlink(path)
    rc = p.returncode
    try:
        doc = json.loads(out) if out.strip() else None
    except ValueError:
        doc = None
    res = {"rc": rc, "wall": round(wall, 4), "rss": ru.ru_maxrss * 1024}
    res["outcome"] = ("ok" if rc == 0 else
                      doc["error"]["type"] if rc == 2 and doc and "error" in doc else f"crash(rc={rc})")
    if rc == 0 and doc:
        res["memory_peak_bytes"] = doc.get("memory_peak_bytes")
    if rc not in (0, 2):
        res["stderr"] = err.decode(errors="replace")[-400:]
    return res


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sieve", required=True)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--files", help="a file of MaskBench file names, one a line: only those")
    ap.add_argument("--max-memory", type=int, default=MAX_MEMORY,
                    help=f"the compile's memory budget in bytes (default {MAX_MEMORY})")
    ap.add_argument("--out")
    a = ap.parse_args()
    folder = Path(a.data) / "maskbench"
    if not folder.is_dir():
        print(f"compile_bounds: {folder} is missing (the benchmark data)", file=sys.stderr)
        return 2
    files = sorted(folder.glob("*.json"))[::a.stride]
    if a.files:
        names = set(Path(a.files).read_text().split())
        files = [f for f in files if f.name in names]
    base = run_with_rss(a.sieve, '{"type": "string"}')
    assert base["rc"] == 0, base
    baseline = base["rss"]
    rss_limit = baseline + a.max_memory

    def one(f: Path):
        schema = json.loads(f.read_text())["schema"]
        r = run_with_rss(a.sieve, json.dumps(schema), a.max_memory)
        r["file"] = f.name
        return r

    t0 = time.monotonic()
    with ThreadPoolExecutor(a.jobs) as ex:
        results = list(ex.map(one, files))
    elapsed = time.monotonic() - t0

    bad = []
    for r in results:
        why = []
        if r["outcome"] not in {"ok"} | OWN_ERRORS | BOUND_ERRORS:
            why.append(f"outcome {r['outcome']}")
        if r["wall"] > WALL_LIMIT_S:
            why.append(f"wall {r['wall']:.2f} s > {WALL_LIMIT_S} s")
        if r["rss"] > rss_limit:
            why.append(f"peak RSS {r['rss'] >> 20} MiB > {rss_limit >> 20} MiB")
        if why:
            bad.append({"file": r["file"], "why": why, **{k: r[k] for k in ("outcome", "wall", "rss")},
                        **({"stderr": r["stderr"]} if "stderr" in r else {})})
    walls = [r["wall"] for r in results]
    rss = [r["rss"] for r in results]
    over_budget = [r for r in results if r["outcome"] in BOUND_ERRORS]
    report = {
        "files": len(results), "stride": a.stride, "jobs": a.jobs, "elapsed_s": round(elapsed, 1),
        "max_memory": a.max_memory, "timeout_ms": TIMEOUT_MS, "address_space": ADDRESS_SPACE,
        "baseline_rss": baseline,
        "outcomes": dict(collections.Counter(r["outcome"] for r in results)),
        "wall_s": {p: pct(walls, p) for p in (50, 90, 99, 100)},
        "peak_rss_mib": {p: round(pct(rss, p) / 2**20, 1) for p in (50, 90, 99, 100)},
        "over_budget": len(over_budget),
        "refused": sorted(f"{r['file']} {r['outcome']}" for r in over_budget),
        # issue 14's target: a compile's peak at most 256 MiB on every schema
        "rss_over_256_mib": sum(1 for x in rss if x - baseline > 256 << 20),
        "over_256_mib": sorted(({"file": r["file"], "outcome": r["outcome"],
                                 "rss_mib": round((r["rss"] - baseline) / 2**20, 1)}
                                for r in results if r["rss"] - baseline > 256 << 20),
                               key=lambda r: -r["rss_mib"]),
        "rss_over_baseline_mib_hist": {f"<={b}": sum(1 for x in rss if (x - baseline) <= b << 20)
                                       for b in (16, 32, 64, 128, 256, 512)},
        "worst_time_overshoot_s": round(max(walls) - TIMEOUT_MS / 1000, 3),
        "worst_rss_over_baseline_mib": round((max(rss) - baseline) / 2**20, 1),
        "slowest": sorted(({"file": r["file"], "wall": r["wall"], "outcome": r["outcome"]} for r in results),
                          key=lambda r: -r["wall"])[:5],
        "largest": sorted(({"file": r["file"], "rss_mib": round(r["rss"] / 2**20, 1), "outcome": r["outcome"]}
                           for r in results), key=lambda r: -r["rss_mib"])[:5],
        "failures": bad,
    }
    text = json.dumps(report, indent=1)
    if a.out:
        Path(a.out).write_text(text + "\n")
    print(f"compile_bounds: {len(results)} schemas in {elapsed:.0f} s; outcomes {report['outcomes']}; "
          f"wall p50/p99/max {report['wall_s'][50]:.3f}/{report['wall_s'][99]:.3f}/{report['wall_s'][100]:.3f} s; "
          f"peak RSS p50/p99/max {report['peak_rss_mib'][50]}/{report['peak_rss_mib'][99]}/"
          f"{report['peak_rss_mib'][100]} MiB (baseline {baseline >> 20} MiB, limit {rss_limit >> 20} MiB; "
          f"{report['rss_over_256_mib']} over 256 MiB past the baseline); "
          f"{len(bad)} failures", file=sys.stderr)
    for b in bad[:20]:
        print(f"compile_bounds: FAIL {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
