"""Runs the JSON-Schema-Test-Suite (draft 2020-12) through `sieve compile` and
`sieve match` and reports one outcome per test.

Each instance is spelled the way sieve's canonical mode writes JSON
(json.dumps with ensure_ascii=False). Object keys have no order in JSON, and
sieve fixes one per location, so for a valid instance the test passes if any
key order is accepted; for an invalid instance every key order must be
rejected (under-constraining is never allowed)."""
import argparse
import collections
import itertools
import json
import os
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "data" / "json-schema-test-suite" / "draft2020-12"
OUTCOMES = Path(__file__).with_name("suite_outcomes.json")
EXCEPTIONS = Path(__file__).with_name("suite_exceptions.txt")
MAX_SPELLINGS = 720


def spellings(v, limit=MAX_SPELLINGS):
    """Every key order of every nested object (capped), as json.dumps text."""
    if isinstance(v, dict):
        keys = list(v)
        per_key = {k: spellings(v[k], limit) for k in keys}
        out = []
        for perm in itertools.permutations(keys):
            for vals in itertools.product(*(per_key[k] for k in perm)):
                out.append("{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + s for k, s in zip(perm, vals)) + "}")
                if len(out) >= limit:
                    return out
        return out or ["{}"]
    if isinstance(v, list):
        out = []
        for vals in itertools.product(*(spellings(x, limit) for x in v)):
            out.append("[" + ", ".join(vals) + "]")
            if len(out) >= limit:
                break
        return out
    return [json.dumps(v, ensure_ascii=False)]


def sieve_bin():
    return os.environ.get("SIEVE_BIN", str(ROOT / "build" / "sieve"))


def sieve(verb, schema, *args, stdin=None):
    """`sieve VERB --schema FILE ARGS...` on a schema object (in a temporary
    file), standard input from stdin: the CompletedProcess, text mode."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(schema, f)
        f.flush()
        return subprocess.run([sieve_bin(), verb, "--schema", f.name, *args], input=stdin,
                              capture_output=True, text=True, timeout=300)


def compile_stats(schema, *args):
    """`sieve compile`'s statistics object for a schema that must compile."""
    r = sieve("compile", schema, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def no_duplicates(pairs):
    """json.loads object_pairs_hook: a key written twice is an error."""
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


def oracle(schema, text):
    """Whether Python's jsonschema (draft 2020-12) accepts the JSON text; a
    duplicate key or a JSON error is a rejection."""
    import jsonschema
    try:
        v = json.loads(text, object_pairs_hook=no_duplicates)
    except ValueError:
        return False
    return jsonschema.Draft202012Validator(schema).is_valid(v)


def sieve_match(schema, texts, *args):
    """Whether `sieve match` accepts each text."""
    r = sieve("match", schema, *args, stdin="".join(json.dumps(t) + "\n" for t in texts))
    assert r.returncode == 0, r.stdout + r.stderr
    got = [g == "1" for g in r.stdout.split()]
    assert len(got) == len(texts), r.stdout
    return got


def assert_agrees(schema, texts, *args):
    """`sieve match` (with options args) and jsonschema (oracle) agree on
    every text."""
    for t, g in zip(texts, sieve_match(schema, texts, *args)):
        assert g == oracle(schema, t), (json.dumps(schema), t, g)


def nested(depth, leaf=0):
    """A value nested depth levels deep, arrays and objects in turn."""
    v = leaf
    for i in range(depth):
        v = {"k": v} if i % 2 else [v]
    return v


def run_group(schema, tests, extra_args=()):
    """Returns (compile_result, [outcome per test]); compile_result is "ok" or
    the error object; outcomes are "pass", "valid_rejected", "invalid_accepted"."""
    r = subprocess.run([sieve_bin(), "compile", "--schema", "-", *extra_args], input=json.dumps(schema),
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        try:
            return json.loads(r.stdout)["error"], []
        except (ValueError, KeyError):
            return {"type": "crash", "message": r.stderr[-500:], "returncode": r.returncode}, []
    cands, owners = [], []
    for i, t in enumerate(tests):
        for s in spellings(t["data"]):
            cands.append(json.dumps(s, ensure_ascii=True))
            owners.append(i)
    # The schema goes in a file so the candidates can use standard input.
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(schema, f)
        path = f.name
    try:
        m = subprocess.run([sieve_bin(), "match", "--schema", path, *extra_args], input="\n".join(cands) + "\n",
                           capture_output=True, text=True, timeout=300)
    finally:
        os.unlink(path)
    res = m.stdout.split()
    if m.returncode != 0 or len(res) != len(cands):
        return {"type": "crash", "message": m.stderr[-500:], "returncode": m.returncode}, []
    accepted = [False] * len(tests)
    for i, x in zip(owners, res):
        accepted[i] |= x == "1"
    outcomes = []
    for t, acc in zip(tests, accepted):
        if t["valid"]:
            outcomes.append("pass" if acc else "valid_rejected")
        else:
            outcomes.append("invalid_accepted" if acc else "pass")
    return "ok", outcomes


def suite_files():
    files = sorted(SUITE.glob("*.json")) + sorted((SUITE / "optional").glob("*.json")) + \
        sorted((SUITE / "optional" / "format").glob("*.json"))
    return files


def run_all(extra_args=()):
    """{ "file#group": {"compile": "ok" | "error: <type> <keyword>", "tests": {desc: outcome}} }
    extra_args go to every sieve call (e.g. --key-order any)."""
    results = {}
    for f in suite_files():
        rel = f.relative_to(SUITE).as_posix()
        for gi, group in enumerate(json.loads(f.read_text())):
            key = f"{rel}#{gi} {group['description']}"
            comp, outs = run_group(group["schema"], group["tests"], extra_args)
            if comp == "ok":
                results[key] = {"compile": "ok",
                                "tests": {t["description"]: o for t, o in zip(group["tests"], outs)}}
            else:
                results[key] = {"compile": "error", "error": comp}
    return results


def summarize(res):
    """Plain, stable form of the results for the checked-in outcomes file."""
    out = {}
    for k, v in res.items():
        if v["compile"] != "ok":
            e = v["error"]
            out[k] = f"compile error: {e.get('type')} {e.get('keyword', '')}".rstrip()
        else:
            out[k] = v["tests"]
    return out


def load_exceptions():
    """Lines 'file#group | test description | reason' of valid instances that
    sieve rejects on purpose."""
    ex = {}
    for line in EXCEPTIONS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) != 3 or not parts[2]:
            raise ValueError(f"bad exceptions line (want 'group | test | reason'): {line}")
        ex[(parts[0], parts[1])] = parts[2]
    return ex


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--update", action="store_true", help=f"rewrite {OUTCOMES.name} from this run")
    args = ap.parse_args()
    res = run_all()
    c = collections.Counter()
    for k, v in res.items():
        if v["compile"] != "ok":
            c["compile_error:" + str(v["error"].get("keyword", v["error"].get("type")))] += 1
            continue
        for d, o in v["tests"].items():
            c[o] += 1
            if o != "pass":
                print(o, "|", k, "|", d)
    print(dict(c))
    if args.update:
        OUTCOMES.write_text(json.dumps(summarize(res), indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        print(f"wrote {OUTCOMES}")
