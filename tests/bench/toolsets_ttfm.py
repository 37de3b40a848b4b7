#!/usr/bin/env python3
"""toolsets_ttfm.py — time to first mask (TTFM) of real tool sets.

Compiles every tool set of the corpus (tests/data/toolsets/<source>/<set>.json,
OpenAI tools lists from function-calling benchmarks and MCP servers) as a
request with tool_choice "required" and parallel tool calls compiles it:

    sieve compile --tools SET --tool-choice required --parallel-tool-calls true

and reports, as markdown on stdout, the distribution of `compile_us` (the
compile time sieve measures itself: the TTFM of an uncached tool list) and of
the DFA `states`, overall, by source and by set size, the slowest sets, and
every set that does not compile with its error. With --out, one JSON object a
line per set: {"set", "source", "tools", "rc", "compile_us", "states",
"wall_s", "error"}.

Reproduce (from the repository root, one job so that timings do not share
the 2 cores):
    cmake -S . -B build-rel -DSV_CUDA=OFF -DCMAKE_BUILD_TYPE=Release
    cmake --build build-rel -j2 --target sieve
    .venv/bin/python tests/bench/toolsets_ttfm.py --sieve build-rel/sieve --out toolsets_ttfm.jsonl

Side by side with llguidance (TTFM as MaskBench counts it for every engine:
compile, matcher and first mask), --prep-out DIR writes each set's call
schema (`sieve compile ... --print-schema`, what the server compiles) as a
MaskBench-style file without tests, and maskbench_compare.sh runs on them
(sieve with --extra-key-orders false, as `compile --tools` and the server
compile tool calls):
    .venv/bin/python tests/bench/toolsets_ttfm.py --sieve build-rel/sieve --prep-out /tmp/ts-prep
    tests/bench/maskbench_compare.sh --prep /tmp/ts-prep --out /tmp/ts-compare \
        --engines "sieve llguidance" --sieve-arg --extra-key-orders --sieve-arg false

Other tool modes or compile options go after --, e.g.
    tests/bench/toolsets_ttfm.py -- --tool-choice auto --tool-format object
(those arguments replace the default "--tool-choice required
--parallel-tool-calls true")."""
import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "toolsets"
DEFAULT_ARGS = ["--tool-choice", "required", "--parallel-tool-calls", "true"]
SIZES = [(1, 1), (2, 4), (5, 9), (10, 19), (20, 49), (50, 128)]


def pct(xs, p):
    """Nearest-rank percentile of a sorted list."""
    if not xs:
        return None
    k = max(0, min(len(xs) - 1, -(-len(xs) * p // 100) - 1))
    return xs[int(k)]


def ms(us):
    return "-" if us is None else f"{us / 1000:.1f}"


def run_one(sieve, path, args, timeout):
    tools = json.loads(path.read_text())
    rec = {"set": path.relative_to(CORPUS).as_posix(), "source": path.parent.name, "tools": len(tools),
           "rc": None, "compile_us": None, "states": None, "wall_s": None, "error": None}
    t = time.monotonic()
    try:
        r = subprocess.run([sieve, "compile", "--tools", str(path), *args], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        rec.update(rc="timeout", wall_s=round(time.monotonic() - t, 3), error=f"no answer in {timeout} s")
        return rec
    rec["wall_s"] = round(time.monotonic() - t, 3)
    rec["rc"] = r.returncode
    try:
        out = json.loads(r.stdout)
    except ValueError:
        out = {}
    if r.returncode == 0 and "compile_us" in out:
        rec["compile_us"], rec["states"] = out["compile_us"], out.get("states")
    else:
        e = out.get("error") if isinstance(out, dict) else None
        rec["error"] = (f"{e.get('type')}: {e.get('message')}" if isinstance(e, dict)
                        else (r.stderr or r.stdout).strip()[-300:] or f"exit {r.returncode}")
    return rec


def write_prep(sieve, sets, args, out):
    """Each set's call schema, as sieve builds it, to out/<source>---<set>.json
    ({description, meta, schema, tests: []}: maskbench_compare.sh --prep).
    Returns the exit status."""
    out.mkdir(parents=True, exist_ok=True)
    bad = 0
    for p in sets:
        r = subprocess.run([sieve, "compile", "--tools", str(p), *args, "--print-schema"], capture_output=True,
                           text=True)
        name = p.relative_to(CORPUS).as_posix()
        if r.returncode != 0:
            print(f"toolsets_ttfm: {name}: {(r.stdout or r.stderr).strip()[-300:]}", file=sys.stderr)
            bad += 1
            continue
        doc = {"description": f"tool set {name} ({' '.join(args)})", "meta": {"source": p.parent.name},
               "schema": json.loads(r.stdout), "tests": []}
        with open(out / (name.replace("/", "---")), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
    print(f"toolsets_ttfm: {len(sets) - bad} call schemas in {out}", file=sys.stderr)
    return 1 if bad else 0


def dist_row(label, recs):
    ok = [r for r in recs if r["compile_us"] is not None]
    us = sorted(r["compile_us"] for r in ok)
    st = sorted(r["states"] for r in ok if r["states"] is not None)
    return (f"| {label} | {len(recs)} | {len(ok)} | {ms(pct(us, 50))} | {ms(pct(us, 90))} | {ms(pct(us, 99))} | "
            f"{ms(us[-1] if us else None)} | {pct(st, 50) if st else '-'} | {st[-1] if st else '-'} |")


def report(recs, args, sieve):
    out = [f"# Tool-set TTFM: `sieve compile --tools SET {' '.join(args)}`", "",
           f"{len(recs)} sets from {CORPUS.relative_to(ROOT)}, sieve = {sieve}. Times are sieve's own compile_us "
           "(ms below).", "",
           "| sets | n | compiled | p50 ms | p90 ms | p99 ms | max ms | states p50 | states max |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
           dist_row("all", recs)]
    for lo, hi in SIZES:
        sub = [r for r in recs if lo <= r["tools"] <= hi]
        if sub:
            out.append(dist_row(f"{lo}{'' if lo == hi else '-' + str(hi)} tools", sub))
    family = lambda src: "pypi-* (one MCP server each)" if src.startswith("pypi-") else src
    for fam in sorted({family(r["source"]) for r in recs}):
        out.append(dist_row(f"source {fam}", [r for r in recs if family(r["source"]) == fam]))
    ok = sorted((r for r in recs if r["compile_us"] is not None), key=lambda r: -r["compile_us"])
    out += ["", "## Slowest", "", "| set | tools | ms | states |", "| --- | ---: | ---: | ---: |"]
    out += [f"| {r['set']} | {r['tools']} | {ms(r['compile_us'])} | {r['states']} |" for r in ok[:10]]
    bad = [r for r in recs if r["compile_us"] is None]
    out += ["", f"## Failures ({len(bad)})", ""]
    if bad:
        out += ["| set | tools | exit | error |", "| --- | ---: | ---: | --- |"]
        pipe = "\\|"  # a | inside a markdown table cell
        out += [f"| {r['set']} | {r['tools']} | {r['rc']} | {(r['error'] or '').replace('|', pipe)} |"
                for r in sorted(bad, key=lambda r: r["set"])]
    else:
        out.append("none")
    return "\n".join(out) + "\n"


def main():
    global CORPUS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sieve", default=os.environ.get("SIEVE_BIN", str(ROOT / "build" / "sieve")))
    ap.add_argument("--corpus", default=str(CORPUS), help="the corpus folder (default %(default)s)")
    ap.add_argument("--jobs", type=int, default=1, help="sets compiled at once (default 1: clean timings)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per compile (default %(default)s)")
    ap.add_argument("--out", help="also write one JSON line per set here")
    ap.add_argument("--filter", default="", help="only sets whose path contains this")
    ap.add_argument("--prep-out", help="write each set's call schema here as a MaskBench-style file instead")
    ap.add_argument("args", nargs="*", help="after --: sieve arguments instead of the default tool mode")
    a = ap.parse_args()
    CORPUS = Path(a.corpus).resolve()
    if not CORPUS.is_dir():
        sys.exit(f"no corpus at {CORPUS}")
    sets = [p for p in sorted(CORPUS.glob("*/*.json")) if a.filter in p.relative_to(CORPUS).as_posix()]
    if not sets:
        sys.exit(f"no tool sets in {CORPUS}")
    args = a.args or DEFAULT_ARGS
    if a.prep_out:
        sys.exit(write_prep(a.sieve, sets, args, Path(a.prep_out)))
    t = time.monotonic()
    with ThreadPoolExecutor(max(1, a.jobs)) as ex:
        recs = list(ex.map(lambda p: run_one(a.sieve, p, args, a.timeout), sets))
    if a.out:
        with open(a.out, "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
    sys.stdout.write(report(recs, args, a.sieve))
    print(f"\n{len(recs)} sets in {time.monotonic() - t:.0f} s wall.")


if __name__ == "__main__":
    main()
