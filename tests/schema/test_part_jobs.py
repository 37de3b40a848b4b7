"""Parts compiled on helper threads (fsm/part_jobs.c, fsm/schema.c ref_part).

A big $ref target (each tool's arguments, a definition many places use) is
compiled by a helper while the compile goes on. SIEVE_COMPILE_HELPERS=0
turns the helpers off (the sequential compile); these tests compare the two.

- The same language: every call list sampled with helpers is accepted
  without them, and the other way round, on real tool sets of 39 to 117
  tools; and the same instances of a schema whose $defs are used many times
  are accepted both ways.
- Deterministic: with helpers, the automaton is the same on every run (the
  parts are numbered as they are made, not as they finish).
- Failures: a part that a helper finds over the DFA-state budget, or empty,
  gives the sequential compile's answer (the compile is redone without
  helpers), with its message and JSON pointer.
"""
import json
import os
import subprocess
import tempfile

import suite

TOOLSETS = suite.ROOT / "tests" / "data" / "toolsets"
SETS = ["pypi-awslabs-aws-healthomics-mcp-server/tools.json", "pypi-excel-mcp-server/tools.json",
        "github-mcp-server/head_all_snapshots.json"]
CALLS = ["--tool-choice", "required", "--parallel-tool-calls", "true"]


def run(helpers, *args, stdin=None):
    env = dict(os.environ, SIEVE_COMPILE_HELPERS=str(helpers))
    return subprocess.run([suite.sieve_bin(), *args], input=stdin, capture_output=True, text=True, timeout=300,
                          env=env)


def compiled(helpers, *args):
    r = run(helpers, "compile", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    stats = json.loads(r.stdout)
    stats.pop("compile_us")
    stats.pop("memory_peak_bytes")
    return stats


def samples(helpers, *args, n=12):
    r = run(helpers, "sample", *args, "-n", str(n), "--seed", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def matches(helpers, texts, *args):
    r = run(helpers, "match", *args, stdin="".join(json.dumps(t) + "\n" for t in texts))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split()


def test_tool_sets_same_language_both_ways():
    for name in SETS:
        args = ["--tools", str(TOOLSETS / name), *CALLS]
        with_helpers = samples(2, *args)
        without = samples(0, *args)
        assert matches(0, with_helpers, *args) == ["1"] * len(with_helpers), name
        assert matches(2, without, *args) == ["1"] * len(without), name


def test_deterministic_with_helpers():
    args = ["--tools", str(TOOLSETS / SETS[0]), *CALLS]
    first = compiled(2, *args)
    assert first["parts"] > 70  # each tool's arguments a part
    for _ in range(3):
        assert compiled(2, *args) == first


def defs_schema():
    """An object whose members refer to a few wide definitions, each used
    more than once and each big enough for a helper."""
    defs = {}
    for d in range(4):
        props = {f"field_{d}_{i}_{'x' * i}": ({"type": "integer"} if i % 3 == 0 else
                                                  {"type": "string", "maxLength": 4} if i % 3 == 1 else
                                                  {"enum": ["on", "off", d]})
                 for i in range(14)}
        defs[f"D{d}"] = {"type": "object", "properties": props, "required": [f"field_{d}_0_"]}
    props = {f"m{k}": {"$ref": f"#/$defs/D{k % 4}"} for k in range(8)}
    props["list"] = {"type": "array", "items": {"$ref": "#/$defs/D1"}}
    return {"$defs": defs, "type": "object", "properties": props, "required": ["m0", "m5"]}


def test_schema_same_instances_both_ways():
    schema = defs_schema()
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(schema, f)
        f.flush()
        texts = samples(2, "--schema", f.name, n=20) + samples(0, "--schema", f.name, n=20)
        # broken copies: a required member dropped, a value of the wrong type
        for t in list(texts[:10]):
            v = json.loads(t)
            v.pop("m0", None)
            texts.append(json.dumps(v))
            v = json.loads(t)
            v["m5"]["field_1_0_"] = "one"
            texts.append(json.dumps(v))
        got = matches(2, texts, "--schema", f.name)
        assert got == matches(0, texts, "--schema", f.name)
        for t, g in zip(texts, got):
            assert (g == "1") == suite.oracle(schema, t), t


def answers(*args):
    """The exit status and output of `sieve compile` without and with
    helpers (times left out)."""
    out = []
    for h in (0, 2):
        r = run(h, "compile", *args)
        doc = json.loads(r.stdout)
        for k in ("compile_us", "memory_peak_bytes"):
            doc.pop(k, None)
        out.append((r.returncode, doc))
    return out


def test_failures_are_the_sequential_ones():
    # a tool whose arguments outgrow the DFA-state budget in a helper
    props = {f"opt_{i}_{'k' * (i % 5)}": {"type": "string"} for i in range(40)}
    tools = [{"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object", "properties": props}}}
             for i in range(3)]
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(tools, f)
        f.flush()
        seq, par = answers("--tools", f.name, *CALLS, "--max-dfa-states", "800")
        assert seq[0] == 2 and seq == par, (seq, par)
    # a definition that is empty (its required member accepts nothing)
    schema = defs_schema()
    schema["$defs"]["D2"]["properties"]["field_2_0_"] = {"allOf": [{"type": "string"}, {"type": "integer"}]}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(schema, f)
        f.flush()
        seq, par = answers("--schema", f.name)
        assert seq == par, (seq, par)
