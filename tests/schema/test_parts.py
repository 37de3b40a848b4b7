"""Parts (fsm/program.c) beyond free-form values: an array item counted by
maxItems becomes a part of its own, so each count costs a call instead of a
copy of the item's automaton. Checked for exactness at the bounds (as many
items as maxItems accepted, one more rejected, a bad item anywhere
rejected), against the flat compilation's size, and for soundness of
samples under jsonschema."""
import json
import subprocess
import tempfile

import jsonschema

import suite

ITEM = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"type": "string", "maxLength": 4},
                                         "c": {"enum": ["x", "y", "z"]}},
        "required": ["a"], "additionalProperties": False}


def run(verb, schema, *args, stdin=None):
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(schema, f)
        f.flush()
        return subprocess.run([suite.sieve_bin(), verb, "--schema", f.name, *args], input=stdin,
                              capture_output=True, text=True, timeout=300)


def match(schema, texts, *args):
    r = run("match", schema, *args, stdin="".join(json.dumps(t) + "\n" for t in texts))
    assert r.returncode == 0, r.stdout + r.stderr
    return [g == "1" for g in r.stdout.split()]


def test_counted_items_are_calls():
    schema = {"type": "array", "minItems": 2, "maxItems": 300, "items": ITEM}
    calls = run("compile", schema, "--any-calls", "true")
    flat = run("compile", schema, "--any-calls", "false")
    assert calls.returncode == 0, calls.stdout
    n_calls = json.loads(calls.stdout)["states"]
    # flat: a copy of the item per count, or over a budget
    if flat.returncode == 0:
        assert n_calls * 4 < json.loads(flat.stdout)["states"], (n_calls, flat.stdout)
    item = {"a": 1, "b": "ab", "c": "y"}
    texts = [json.dumps([item] * k) for k in (1, 2, 3, 150, 299, 300, 301)]
    bad = [dict(item, a=-1), dict(item, b="toolong"), dict(item, d=1), {"b": "x"}]
    for pos in (0, 1, 250, 299):
        for b in bad:
            arr = [item] * 300
            arr[pos] = b
            texts.append(json.dumps(arr))
    got = match(schema, texts, "--any-calls", "true")
    assert got[:7] == [False, True, True, True, True, True, False]
    assert not any(got[7:])


def test_counted_item_samples_are_valid():
    schema = {"type": "array", "maxItems": 40, "items": ITEM}
    r = run("sample", schema, "--any-calls", "true", "-n", "30", "--seed", "3", "--max-len", "400")
    assert r.returncode == 0, r.stderr
    v = jsonschema.Draft202012Validator(schema)
    lines = r.stdout.split("\n")
    samples = [json.loads(json.loads(s)) for s in lines if s]
    assert len(samples) == 30
    for s in samples:
        assert not list(v.iter_errors(s)), s
