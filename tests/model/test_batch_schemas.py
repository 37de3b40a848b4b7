"""Constrained generation at scale through the engine (`generate --batch`).

At least 100 schemas: every schema in schemas/ and the JSON-Schema-Test-Suite
(draft 2020-12) groups that sieve compiles, taken in file order. Each is a
chat request at temperature 1.0 on the default model (SmolLM2-135M-Instruct),
all in one batch through the engine. Every output must be JSON that Python's
jsonschema accepts under the schema's own draft (format checking on,
patterns as ECMA-262: the judge of tests/schema/test_sampling.py), and end
with finish reason "stop".

Then the same schemas again with max_tokens set to each one's minimum (the
engine's up-front refusal says how many tokens the constraint needs) plus 5:
still 100% valid, complete, within the budget.

Needs SIEVE_BIN and the model that scripts/fetch-model.sh installs.
"""
import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The judge of tests/schema/test_sampling.py: jsonschema under the schema's
# own draft, format checking on, patterns with the ECMA-262 engine `regress`
# (Python's re has no \p{..}), numbers read exactly.
sys.path.insert(0, str(ROOT / "tests" / "schema"))
from test_sampling import validator as judge  # noqa: E402
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
SUITE = ROOT / "tests" / "data" / "json-schema-test-suite" / "draft2020-12"
WANT = 110


def sieve():
    b = os.environ.get("SIEVE_BIN")
    assert b and os.access(b, os.X_OK), "SIEVE_BIN must name the sieve binary"
    assert MODEL.is_file(), f"{MODEL} is missing: scripts/fetch-model.sh fetches it"
    return b


def compiles(schema):
    r = subprocess.run([sieve(), "compile", "--schema", "-"], input=json.dumps(schema).encode(),
                       capture_output=True)
    return r.returncode == 0


def fits_int64(v):
    """A batch line is read with jansson, whose integers are 64-bit: a larger
    one makes the line an error line (checked in test_generate_batch.py), so
    such schemas go through `sieve generate --schema` instead."""
    if isinstance(v, bool):
        return True
    if isinstance(v, int):
        return -2**63 <= v < 2**63
    if isinstance(v, dict):
        return all(fits_int64(x) for x in v.values())
    if isinstance(v, list):
        return all(fits_int64(x) for x in v)
    return True


def collect():
    out = []
    for f in sorted((ROOT / "schemas").glob("*.json")):
        s = json.loads(f.read_text())
        if fits_int64(s) and compiles(s):
            out.append((f.name, s))
    for f in sorted(SUITE.glob("*.json")):
        for i, g in enumerate(json.loads(f.read_text())):
            if len(out) >= WANT:
                return out
            s = g["schema"]
            if not isinstance(s, dict):  # a batch line's schema is an object, as in the OpenAI API
                continue
            if "\\u0000" in json.dumps(s):  # jansson refuses NUL in the line (an error line)
                continue
            if "$schema" not in s:
                s = dict(s, **{"$schema": "https://json-schema.org/draft/2020-12/schema"})
            if fits_int64(s) and compiles(s):
                out.append((f"{f.name}#{i}", s))
    return out


@pytest.fixture(scope="module")
def schemas():
    s = collect()
    assert len(s) >= 100, f"only {len(s)} schemas compile"
    return s


def run_batch(lines, tmp_path, name):
    f = tmp_path / name
    f.write_text("".join(json.dumps(l) + "\n" for l in lines))
    r = subprocess.run([sieve(), "generate", "-m", str(MODEL), "--batch", str(f), "--max-num-seqs", "16",
                        "--threads", "2"], capture_output=True, timeout=900)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    outs = [json.loads(x) for x in r.stdout.decode().splitlines() if x.strip()]
    assert [o["index"] for o in outs] == list(range(len(lines)))
    return outs


def validator(schema):
    return judge(json.loads(json.dumps(schema), parse_float=Decimal))


def line(schema, i, max_tokens):
    return {"prompt": "Reply with one JSON value for this schema: " + json.dumps(schema)[:600], "chat": True,
            "schema": schema, "max_tokens": max_tokens, "temperature": 1.0, "seed": 100 + i}


@pytest.fixture(scope="module")
def need(schemas, tmp_path_factory):
    """Each schema's minimum in tokens, from the engine's up-front refusal."""
    probe = run_batch([line(s, i, 1) for i, (_, s) in enumerate(schemas)], tmp_path_factory.mktemp("probe"),
                      "probe.jsonl")
    out = []
    for (name, s), o in zip(schemas, probe):
        if "error" in o:
            m = re.search(r"needs at least (\d+) tokens", o["error"]["message"])
            assert m, (name, o)
            out.append(int(m.group(1)))
        else:  # fits in one token (a one-token literal)
            out.append(1)
    return out


def check(schemas, budgets, outs):
    bad = []
    for (name, s), n, o in zip(schemas, budgets, outs):
        assert "error" not in o, (name, o)
        text = o["outputs"][0]["text"]
        try:
            validator(s).validate(json.loads(text, parse_float=Decimal))
        except Exception as e:  # noqa: BLE001 - the message is the report
            bad.append((name, text, str(e)[:200]))
        assert o["outputs"][0]["finish_reason"] == "stop", (name, o)
        assert o["completion_tokens"] <= n, (name, o)
    assert not bad, bad


def test_all_outputs_valid_at_temperature_1(schemas, need, tmp_path):
    budgets = [n + 32 for n in need]
    outs = run_batch([line(s, i, b) for i, ((_, s), b) in enumerate(zip(schemas, budgets))], tmp_path, "t1.jsonl")
    check(schemas, budgets, outs)


def test_minimum_budget_plus_5(schemas, need, tmp_path):
    budgets = [n + 5 for n in need]
    outs = run_batch([line(s, 1000 + i, b) for i, ((_, s), b) in enumerate(zip(schemas, budgets))], tmp_path,
                     "tight.jsonl")
    check(schemas, budgets, outs)
