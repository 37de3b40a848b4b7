#!/usr/bin/env python3
"""Extract every regex from the benchmark JSON Schemas, for the regex corpus run.

Usage: extract_patterns.py DATA_DIR OUT_FILE

DATA_DIR is the shared data folder (../shared/data from the repository root).
Reads maskbench/*.json (objects {schema: ...}) and
json-schema-test-suite/draft2020-12/*.json and optional/**/*.json (arrays of
{schema: ...}); walks each schema, collecting every `pattern` string and every
`patternProperties` key; writes the distinct ones, in first-seen order over
the sorted file list, one JSON string literal per line (ASCII, so a lone
surrogate or U+2028 cannot split or break a line) to OUT_FILE.

Exits non-zero with a message if the data folder or any expected part of it
is missing, or if no pattern is found: this run must never pass by skipping.
"""
import glob
import json
import os
import sys

# Keywords whose values are data, not subschemas: never search them.
DATA_KEYWORDS = {"const", "enum", "default", "examples", "example"}
# Keywords whose values map names (not keywords) to subschemas.
SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}


def walk(node, out):
    """Collects the patterns of one schema (or list of schemas) into out."""
    if isinstance(node, list):
        for item in node:
            walk(item, out)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in DATA_KEYWORDS:
            continue
        if key == "pattern" and isinstance(value, str):
            out.append(value)
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            if key == "patternProperties":
                out.extend(value.keys())
            for sub in value.values():
                walk(sub, out)  # a dependencies list of names holds no dict: harmless
        else:
            walk(value, out)


def fail(msg):
    print(f"extract_patterns.py: {msg}", file=sys.stderr)
    sys.exit(1)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {path}: {e}")


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    data, out_path = argv[1], argv[2]
    if not os.path.isdir(data):
        fail(f"data folder {data} is missing; the regex corpus run needs the benchmark data "
             "(maskbench and json-schema-test-suite)")
    maskbench = os.path.join(data, "maskbench")
    suite = os.path.join(data, "json-schema-test-suite", "draft2020-12")
    for d in (maskbench, suite):
        if not os.path.isdir(d):
            fail(f"{d} is missing")

    patterns, counts = [], {}
    mb_files = sorted(glob.glob(os.path.join(maskbench, "*.json")))
    if not mb_files:
        fail(f"no *.json files in {maskbench}")
    for path in mb_files:
        doc = load(path)
        if not isinstance(doc, dict) or "schema" not in doc:
            fail(f"{path}: expected an object with a 'schema' member")
        walk(doc["schema"], patterns)
    counts["maskbench"] = (len(mb_files), len(patterns))

    suite_files = sorted(glob.glob(os.path.join(suite, "*.json")))
    suite_files += sorted(glob.glob(os.path.join(suite, "optional", "**", "*.json"), recursive=True))
    if not suite_files:
        fail(f"no *.json files in {suite}")
    before = len(patterns)
    for path in suite_files:
        doc = load(path)
        if not isinstance(doc, list):
            fail(f"{path}: expected an array of test groups")
        for group in doc:
            if isinstance(group, dict) and "schema" in group:
                walk(group["schema"], patterns)
    counts["json-schema-test-suite"] = (len(suite_files), len(patterns) - before)

    seen, unique = set(), []
    for p in patterns:
        if p not in seen:
            seen.add(p)
            unique.append(p)
    if not unique:
        fail("no patterns found")
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w", encoding="ascii") as f:
        for p in unique:
            f.write(json.dumps(p, ensure_ascii=True) + "\n")
    for name, (files, n) in counts.items():
        print(f"extract_patterns.py: {name}: {files} files, {n} patterns")
    print(f"extract_patterns.py: {len(unique)} distinct patterns written to {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
