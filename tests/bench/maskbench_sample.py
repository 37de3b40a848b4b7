#!/usr/bin/env python3
"""maskbench_sample.py: the fixed MaskBench sample that every engine runs.

MaskBench (../shared/data/maskbench) has 7,837 files named `Subset---name.json`
(Github_easy, Kubernetes, Snowplow, ...) or `Subset_N.json` (BFCL_java_12.json).
The sample is stratified by subset: within each subset the file names are
sorted (Python's sorted(), i.e. by code point) and m = max(MIN_PER_SUBSET,
ceil(n / STRIDE)) files are taken at the evenly spaced positions
floor(k * n / m), k = 0 .. m-1 (all n when m >= n). With STRIDE 15 that is
about every 15th file of each subset, and no subset is left out.

The result is checked in as maskbench_sample.txt (one file name per line,
sorted). Regenerate it with
    python3 tests/bench/maskbench_sample.py --data ../shared/data/maskbench \
        --out tests/bench/maskbench_sample.txt
and check that the checked-in list still matches the data with --check.
Standard library only.
"""
import argparse
import collections
import math
import os
import re
import sys

STRIDE = 15
MIN_PER_SUBSET = 3


def subset_of(name: str) -> str:
    if "---" in name:
        return name.split("---", 1)[0]
    return re.sub(r"_\d+\.json$", "", name)


def sample(names):
    by_subset = collections.defaultdict(list)
    for n in names:
        if n.endswith(".json"):
            by_subset[subset_of(n)].append(n)
    picked = []
    for sub in sorted(by_subset):
        files = sorted(by_subset[sub])
        n = len(files)
        m = min(n, max(MIN_PER_SUBSET, math.ceil(n / STRIDE)))
        picked.extend(files[(k * n) // m] for k in range(m))
    return sorted(picked), by_subset


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_data = os.path.normpath(os.path.join(here, "..", "..", "..", "shared", "data", "maskbench"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=default_data, help="MaskBench data folder (default %(default)s)")
    ap.add_argument("--out", help="write the list here (default: standard output)")
    ap.add_argument("--check", metavar="FILE", help="exit 1 unless FILE equals the sample drawn from --data")
    ap.add_argument("--stats", action="store_true", help="print per-subset counts to standard error")
    args = ap.parse_args()

    if not os.path.isdir(args.data):
        sys.exit(f"maskbench_sample: no such folder: {args.data}")
    picked, by_subset = sample(os.listdir(args.data))
    if args.stats:
        got = collections.Counter(subset_of(n) for n in picked)
        for sub in sorted(by_subset):
            print(f"{sub:24} {len(by_subset[sub]):5} -> {got[sub]:3}", file=sys.stderr)
        print(f"{'total':24} {sum(map(len, by_subset.values())):5} -> {len(picked):3}", file=sys.stderr)
    text = "".join(n + "\n" for n in picked)
    if args.check:
        with open(args.check, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(f"maskbench_sample: {args.check} differs from the sample drawn from {args.data}")
        return
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
