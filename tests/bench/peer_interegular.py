#!/usr/bin/env python3
"""peer_interegular.py — the regex compile benchmark's patterns, through interegular.

interegular is the regex -> FSM library Outlines builds its constraints on
(Outlines calls `interegular.parse_pattern(p).to_fsm().reduce()` and then turns
the character FSM into a byte FSM). This script times that peer on the same
patterns as bench_regex_compile, for context only: it is a different language
(Python), a different alphabet (characters, not bytes) and a different dialect
(no \\p{..}; its own reading of ^ and $), so states are not comparable one for
one, and a pattern it refuses is reported as such. interegular refuses the
anchors ^ and $; Outlines' patterns are implicitly whole-string, as sieve's
are, so a leading ^ and a trailing $ are dropped before the peer sees the
pattern (the same language under whole-string matching).

Columns: parse + to_fsm (a DFA, not minimal), and parse + to_fsm + reduce
(minimal), each with its state count and median / 99th-percentile µs.

  python3 tests/bench/peer_interegular.py --bench build-rel/tests/bench/bench_regex_compile [-t SECONDS]

Needs `pip install interegular` (deliberately not in tests/requirements.txt).
The patterns come from `bench_regex_compile --list`, so the two stay in step.
"""
import argparse
import json
import platform
import signal
import subprocess
import sys
import time

try:
    import interegular
except ImportError:
    sys.exit("peer_interegular.py: needs the interegular package (pip install interegular)")


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def load_patterns(bench):
    out = subprocess.run([bench, "--list"], check=True, capture_output=True, text=True).stdout
    cases = []
    for line in out.splitlines():
        name, pat = line.split("\t", 1)
        cases.append((name, json.loads(pat)))
    return cases


def strip_anchors(p):
    """Drops a leading ^ and a trailing unescaped $ (whole-string matching
    makes them no-ops at those places)."""
    if p.startswith("^"):
        p = p[1:]
    if p.endswith("$"):
        k = len(p) - 1
        slashes = 0
        while k - 1 - slashes >= 0 and p[k - 1 - slashes] == "\\":
            slashes += 1
        if slashes % 2 == 0:
            p = p[:-1]
    return p


def pct(sorted_ns, p):
    """Nearest-rank percentile, in µs."""
    n = len(sorted_ns)
    r = min(max(int(p * n + 0.999999), 1), n)
    return sorted_ns[r - 1] / 1000.0


def time_runs(fn, secs, max_reps, limit_s):
    """Runs fn until secs have passed (at least 5, at most max_reps runs).
    Each run is cut off after limit_s seconds (Timeout)."""
    samples = []
    t_start = time.perf_counter()
    fn()  # warm-up, and fail early
    while len(samples) < max_reps:
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        t0 = time.perf_counter_ns()
        try:
            fn()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        samples.append(time.perf_counter_ns() - t0)
        if len(samples) >= 5 and time.perf_counter() - t_start > secs:
            break
    samples.sort()
    return samples


def cell(p, width=48):
    s = p[:width].replace("|", "\\|")
    return f"`{s}`" + ("…" if len(p) > width else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", required=True, help="path to bench_regex_compile (for --list)")
    ap.add_argument("-t", type=float, default=1.0, help="seconds per pattern and column (default 1.0)")
    ap.add_argument("--max-reps", type=int, default=2000)
    ap.add_argument("--limit", type=float, default=20.0, help="seconds before one compile is abandoned")
    args = ap.parse_args()
    signal.signal(signal.SIGALRM, _alarm)

    print(f"interegular {interegular.__version__ if hasattr(interegular, '__version__') else '?'}, "
          f"Python {platform.python_version()}; until {args.t:.2f} s per pattern and column "
          f"(at least 5 runs, at most {args.max_reps}).\n")
    print("| name | pattern | to_fsm states | reps | to_fsm p50 µs | to_fsm p99 µs "
          "| reduced states | reps | +reduce p50 µs | +reduce p99 µs |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    t_all = time.perf_counter()
    for name, shown in load_patterns(args.bench):
        pat = strip_anchors(shown)
        row = [name, cell(shown)]
        try:
            signal.setitimer(signal.ITIMER_REAL, args.limit)
            try:
                fsm = interegular.parse_pattern(pat).to_fsm()
                red = fsm.reduce()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            s1 = time_runs(lambda: interegular.parse_pattern(pat).to_fsm(), args.t, args.max_reps, args.limit)
            s2 = time_runs(lambda: interegular.parse_pattern(pat).to_fsm().reduce(), args.t, args.max_reps,
                           args.limit)
            row += [str(len(fsm.states)), str(len(s1)), f"{pct(s1, 0.5):.1f}", f"{pct(s1, 0.99):.1f}",
                    str(len(red.states)), str(len(s2)), f"{pct(s2, 0.5):.1f}", f"{pct(s2, 0.99):.1f}"]
        except Timeout:
            row += [f"over {args.limit:g} s"] + [""] * 7
        except Exception as e:  # the peer refuses the pattern: say so, with its reason
            row += [f"refused: {type(e).__name__}"] + [""] * 7
        print("| " + " | ".join(row) + " |", flush=True)
    print(f"\nTotal wall time: {time.perf_counter() - t_all:.1f} s")


if __name__ == "__main__":
    main()
