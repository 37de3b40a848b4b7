#!/usr/bin/env python3
"""maskbench_subset.py — a fixed MaskBench subset as a regression test.

Runs tests/bench/maskbench_coverage.py's per-schema check (compile, `match`
on every test instance, `sample -n 3` judged by jsonschema) on a fixed,
deterministic subset of ../shared/data/maskbench: every 19th file of the
folder sorted by name (413 of the 7,837 files), 2 jobs, 60 s per schema
(the benchmark's limit; the slowest passing file takes about 15 s on a
loaded 2-core machine, so a slower CI machine does not turn it into a
timeout). Each sieve process may use 3 GiB of address space (a schema that
needs more is a compile error of type nomem), so two jobs fit a small CI
machine. About 2 minutes on 2 cores.

Options: every sieve call gets --allow-unknown-formats (a `format` outside
sieve's supported set is an annotation, as JSON Schema allows), the same as
the benchmark's run (b) in BENCHMARKS.md. It lets the schemas with such
formats go through match and sample too, so more of the compiler is
exercised. MaskBench labels its instances with format checking on, so an
invalid instance that sieve accepts only because of such a format is the
outcome `ignored_format` (expected, not a failure); samples are judged with
only sieve's formats checked.

The test FAILS when
  - any schema has an invalidation error (an invalid instance accepted), a
    sample error (a sample that is not JSON, has a repeated key, or that
    jsonschema rejects) or a crash: soundness bugs, whatever is expected;
  - a file that tests/extended/maskbench_expected.json expects "passing" is
    not passing any more (compile error, validation error, timeout, ...);
  - a file passes that is not expected to: an improvement, but the
    expectations must follow it, so the message says to run --update;
  - the data folder is missing, or its subset differs from the expected one.
Other changes (say compile_error -> validation_error) are printed, not
failures.

  --update   run, then rewrite maskbench_expected.json from this run's
             outcomes (soundness problems still fail the run).

Usage:
  tests/extended/maskbench_subset.py [--sieve build/sieve] [--data ../shared/data]
      [--jobs 2] [--out FILE] [--update]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
import maskbench_coverage as mb  # noqa: E402

EXPECTED = os.path.join(ROOT, "tests", "extended", "maskbench_expected.json")
STRIDE = 19
SAMPLES = 3
TIMEOUT_S = 60.0
MEMORY_MB = 3072          # address-space limit of each sieve process
SEED = 1
SIEVE_ARGS = ["--allow-unknown-formats"]
SOUNDNESS = ("invalidation_error", "sample_error", "crash")


def subset(folder):
    names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    return names[::STRIDE]


def reason(rec):
    """A one-line reason for a record's outcome."""
    o = rec["outcome"]
    if rec.get("error"):
        e = rec["error"]
        return "%s/%s: %s" % (e.get("type"), e.get("keyword"), (e.get("message") or "")[:160])
    if o == "validation_error":
        causes = collections.Counter(e.get("cause") for e in rec.get("validation_errors", []))
        return "rejected valid instances: " + ", ".join("%s x%d" % kv for kv in causes.items())
    if o == "crash":
        return json.dumps(rec.get("crash"))[:300]
    if o == "timeout":
        return "over %.0f s (wall %.1f s)" % (TIMEOUT_S, rec.get("wall_s", 0))
    return ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sieve", default=os.path.join(ROOT, "build", "sieve"),
                    help="the sieve binary (default build/sieve)")
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"),
                    help="the shared data folder holding maskbench/ (default ../shared/data)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--out", help="JSONL records (default: extended/maskbench_subset.jsonl next to sieve)")
    ap.add_argument("--expected", default=EXPECTED, help=argparse.SUPPRESS)
    ap.add_argument("--update", action="store_true", help="rewrite the expectations from this run")
    a = ap.parse_args(argv)

    folder = os.path.join(a.data, "maskbench")
    if not os.path.isdir(folder):
        print("maskbench_subset: FAIL: %s is missing; this test needs the benchmark data "
              "(../shared/data, see its README)" % folder, file=sys.stderr)
        return 1
    if not os.access(a.sieve, os.X_OK):
        print("maskbench_subset: FAIL: %s is not an executable; build sieve first" % a.sieve, file=sys.stderr)
        return 1
    names = subset(folder)
    expected = None
    if not a.update:
        try:
            with open(a.expected, encoding="utf-8") as f:
                expected = json.load(f)
        except OSError as e:
            print("maskbench_subset: FAIL: cannot read %s (%s); run with --update to create it"
                  % (a.expected, e), file=sys.stderr)
            return 1
        want = sorted(expected["files"])
        if want != names:
            missing = sorted(set(want) - set(names))[:5]
            extra = sorted(set(names) - set(want))[:5]
            print("maskbench_subset: FAIL: the data's subset differs from %s (%d files there, %d here; "
                  "missing e.g. %s, new e.g. %s): is %s the MaskBench copy the expectations were made on?"
                  % (os.path.relpath(a.expected, ROOT), len(want), len(names), missing, extra, folder),
                  file=sys.stderr)
            return 1

    out = a.out or os.path.join(os.path.dirname(os.path.abspath(a.sieve)), "extended", "maskbench_subset.jsonl")
    cfg = {"sieve": os.path.abspath(a.sieve), "timeout": TIMEOUT_S, "samples": SAMPLES,
           "seed": SEED, "extra": SIEVE_ARGS, "memory_mb": MEMORY_MB}
    print("maskbench_subset: %d files (every %dth of %s), %d jobs, %.0f s per schema, %d samples, %s"
          % (len(names), STRIDE, folder, a.jobs, TIMEOUT_S, SAMPLES, " ".join(SIEVE_ARGS)), flush=True)
    t0 = time.monotonic()
    results = mb.run_all([os.path.join(folder, n) for n in names], cfg, a.jobs, out)
    wall = time.monotonic() - t0
    counts = collections.Counter(r["outcome"] for r in results.values())
    print("maskbench_subset: %s in %.0f s; records in %s"
          % (", ".join("%s %d" % (o, counts[o]) for o in mb.OUTCOMES if counts[o]), wall, out))

    failures = []
    for n in names:
        r = results[n]
        for p in SOUNDNESS:
            if p in r.get("problems", []):
                failures.append("%s: %s (soundness bug) %s" % (n, p, reason(r) if p == "crash" else ""))
    slow = sorted((r["wall_s"], n) for n, r in results.items()
                  if r["outcome"] == "passing" and r.get("wall_s", 0) > TIMEOUT_S / 3)
    for w, n in slow:
        print("maskbench_subset: note: %s passes but took %.1f s of its %.0f s" % (n, w, TIMEOUT_S))

    if a.update:
        doc = {
            "about": "Expected outcomes of tests/extended/maskbench_subset.py (every %dth MaskBench file "
                     "by name; sieve %s; %d samples; %.0f s per schema). Regenerate with "
                     "`tests/extended/maskbench_subset.py --update`." % (STRIDE, " ".join(SIEVE_ARGS),
                                                                         SAMPLES, TIMEOUT_S),
            "counts": {o: counts[o] for o in mb.OUTCOMES},
            "files": {n: results[n]["outcome"] for n in names},
        }
        with open(a.expected, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=False)
            f.write("\n")
        print("maskbench_subset: wrote %s (%d passing of %d)" % (a.expected, counts["passing"], len(names)))
    else:
        exp = expected["files"]
        newly = []
        for n in names:
            was, now = exp[n], results[n]["outcome"]
            if was == now:
                continue
            if was == "passing":
                failures.append("%s: expected passing, now %s: %s" % (n, now, reason(results[n])))
            elif now == "passing" and was == "timeout":
                # Near the time limit the outcome depends on the machine: a
                # faster one may finish. Not a failure either way.
                print("maskbench_subset: note: %s was a timeout, passes now" % n)
            elif now == "passing":
                newly.append(n)
            else:
                print("maskbench_subset: note: %s was %s, now %s: %s" % (n, was, now, reason(results[n])))
        if newly:
            failures.append("%d file(s) pass that are not expected to (%s%s): good news; run "
                            "`tests/extended/maskbench_subset.py --update` (with --sieve and --data as here) "
                            "and commit tests/extended/maskbench_expected.json"
                            % (len(newly), ", ".join(newly[:8]), ", ..." if len(newly) > 8 else ""))

    if failures:
        print("maskbench_subset: FAIL (%d):" % len(failures), file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    print("maskbench_subset: OK (%d passing of %d, as expected)" % (counts["passing"], len(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
