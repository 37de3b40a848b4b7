#!/usr/bin/env python3
"""maskbench_prep.py: pre-serialize MaskBench test instances the way MaskBench does.

    python3 tests/bench/maskbench_prep.py --data ../shared/data/maskbench \
        --sample tests/bench/maskbench_sample.txt --out /tmp/maskbench-prep

For every file named in --sample (one MaskBench file name per line; blank
lines and lines starting with '#' are skipped; without --sample, every *.json
of --data), writes OUT/<same name>: the same JSON object
{description, meta, schema, tests: [...]} where each test gains
    "text": json.dumps(data, indent=None, ensure_ascii=False)
which is exactly the instance text MaskBench tokenizes (separators ", " and
": ", numbers as Python writes them). A C reader (`sieve maskbench`) can use
`text` byte for byte instead of re-serializing `data`.

The output files are UTF-8, written with ensure_ascii=False and allow_nan=False;
every other field is re-serialized by Python's json module (same values, same
key order; only the spelling of some numbers in the schema may change, e.g.
1E5 -> 100000.0). Standard library only.
"""
import argparse
import json
import os
import sys


def instance_text(data) -> str:
    return json.dumps(data, indent=None, ensure_ascii=False)


def read_sample(path):
    names = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                names.append(line)
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="MaskBench data folder")
    ap.add_argument("--sample", help="file listing the MaskBench file names to prepare (default: all)")
    ap.add_argument("--out", required=True, help="output folder (created)")
    args = ap.parse_args()

    if not os.path.isdir(args.data):
        sys.exit(f"maskbench_prep: no such folder: {args.data}")
    if args.sample:
        names = read_sample(args.sample)
    else:
        names = sorted(n for n in os.listdir(args.data) if n.endswith(".json"))
    if not names:
        sys.exit("maskbench_prep: nothing to prepare")
    os.makedirs(args.out, exist_ok=True)

    n_tests = 0
    for name in names:
        if os.sep in name or name.startswith("."):
            sys.exit(f"maskbench_prep: bad file name in sample: {name!r}")
        src = os.path.join(args.data, name)
        with open(src, encoding="utf-8") as f:
            doc = json.load(f)
        for test in doc.get("tests", []):
            test["text"] = instance_text(test["data"])
            # the text must be encodable (no lone surrogates) for every engine
            test["text"].encode("utf-8")
            n_tests += 1
        tmp = os.path.join(args.out, "." + name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, allow_nan=False)
            f.write("\n")
        os.replace(tmp, os.path.join(args.out, name))
    print(f"maskbench_prep: {len(names)} files, {n_tests} instances -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
