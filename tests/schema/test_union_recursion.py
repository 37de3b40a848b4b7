"""Unions whose branches recurse, checked against Python's jsonschema.

A union of objects where one branch is a recursive `$ref` still being
expanded (`"items": {"anyOf": [{"$ref": "#/$defs/state"}, {"$ref":
"#/$defs/sub"}]}` inside `sub`) holds a call beside another branch that
starts with the same byte `{`: a choice the linker cannot make. Before, the
whole schema then compiled flat, the recursion cut at max_ref_depth, and
most such schemas went over a state budget (MaskBench's
`Github_medium---o39146`, `o79622`). Now the union becomes a part of its own,
compiled once every part it names is known, with the called parts' automata
inline (schema.c `union_calls`, docs/fsm.md). Each shape here compiles,
accepts values 50 levels deep, refuses them broken at any level, and agrees
with jsonschema on random values.
"""
import json
import random

from suite import assert_agrees, oracle, sieve as run, sieve_match as match

DRAFT = "https://json-schema.org/draft/2020-12/schema"

# MaskBench's Github_medium---o39146, trimmed: an exception whose causes are
# exceptions or references to one (a closed object of one required key).
EXCEPTION = {
    "$schema": DRAFT, "type": "object", "required": ["statusCode"], "additionalProperties": False,
    "properties": {"statusCode": {"type": "integer"}, "stackTrace": {"$ref": "#/$defs/exception"}},
    "$defs": {
        "exception": {"type": "object", "required": ["type"], "properties": {
            "type": {"type": "string"}, "message": {"type": "string"},
            "suppressed": {"type": "array", "items": {"$ref": "#/$defs/maybeCircular"}},
            "causedBy": {"$ref": "#/$defs/maybeCircular"}}},
        "circular": {"type": "object", "additionalProperties": False, "required": ["circularReference"],
                     "properties": {"circularReference": {"$ref": "#/$defs/exception"}}},
        "maybeCircular": {"oneOf": [{"$ref": "#/$defs/exception"}, {"$ref": "#/$defs/circular"}]},
    },
}

# MaskBench's Github_medium---o79622, trimmed: states, compound states of
# states, and parallel states of regions of states (open objects, types
# as strings).
MACHINE = {
    "$schema": DRAFT, "type": "object", "properties": {
        "name": {"type": "string"},
        "states": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/state"}, {"$ref": "#/$defs/sub"},
                                                        {"$ref": "#/$defs/parallel"}]}}},
    "$defs": {
        "state": {"type": "object", "properties": {"name": {"type": "string"}, "type": {"type": "string"}},
                  "required": ["name", "type"]},
        "sub": {"type": "object", "properties": {
            "name": {"type": "string"},
            "states": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/state"}, {"$ref": "#/$defs/sub"},
                                                            {"$ref": "#/$defs/parallel"}]}},
            "type": {"type": "string"}}, "required": ["name", "type", "states"]},
        "parallel": {"type": "object", "properties": {
            "name": {"type": "string"},
            "regions": {"type": "array", "items": {"type": "array", "items": {"anyOf": [
                {"$ref": "#/$defs/state"}, {"$ref": "#/$defs/sub"}, {"$ref": "#/$defs/parallel"}]}}},
            "type": {"type": "string"}}, "required": ["name", "type", "regions"]},
    },
}


def exception(depth):
    """depth causes deep, exceptions and references to one in turn."""
    v = {"type": "E0"}
    for i in range(depth):
        v = {"type": f"E{i + 1}", "causedBy": v} if i % 2 else {"circularReference": v}
        if not i % 2:
            v = {"type": f"E{i + 1}", "suppressed": [v, {"type": "x"}]}
    return {"statusCode": 500, "stackTrace": v}


def machine(depth):
    """depth levels of compound and parallel states in turn."""
    v = {"name": "leaf", "type": "state"}
    for i in range(depth):
        if i % 2:
            v = {"name": f"s{i}", "states": [v, {"name": "x", "type": "state"}], "type": "sub"}
        else:
            v = {"name": f"p{i}", "regions": [[v], []], "type": "parallel"}
    return {"name": "m", "states": [v]}


def compiles_whole(schema):
    r = run("compile", schema)
    assert r.returncode == 0, r.stdout + r.stderr
    st = json.loads(r.stdout)
    assert not st["recursion_truncated"], st
    assert "calls" not in st["narrowed_by_budget"], st
    return st


def check_deep(schema, make, breakers):
    """Values 1, 2, 5 and 50 deep accepted; each broken by a replacement at
    its first and last occurrence refused."""
    good = [json.dumps(make(d)) for d in (1, 2, 5, 50)]
    bad = []
    for t in good:
        for old, new in breakers:
            for at in (t.find(old), t.rfind(old)):
                if at >= 0:
                    bad.append(t[:at] + new + t[at + len(old):])
    for t in good[:3] + bad[:12]:  # jsonschema on the shallow ones (it is slow on deep unions)
        assert oracle(schema, t) == (t in good), t
    assert all(match(schema, good)), json.dumps(schema)
    got = match(schema, bad)
    assert not any(got), [t for t, g in zip(bad, got) if g][:2]


def test_an_exception_and_references_to_it_nest_to_any_depth():
    compiles_whole(EXCEPTION)
    check_deep(EXCEPTION, exception, [('"type": "E0"', '"kind": "E0"'),
                                      ('"circularReference"', '"circularReference": {"type": "t"}, "x"'),
                                      ('"suppressed": [', '"suppressed": [3, ')])


def test_compound_and_parallel_states_nest_to_any_depth():
    compiles_whole(MACHINE)
    # Open objects: an outer state takes anything inner as extra members,
    # so the breaks are in the outermost state.
    good, bad = [], []
    for d in (1, 2, 5, 50):
        v = machine(d)
        good.append(json.dumps(v))
        for key, wrong in (("type", 5), ("name", ["p"]), ("type", None)):
            b = json.loads(good[-1])
            b["states"][0][key] = wrong
            bad.append(json.dumps(b))
    for t in good[:3] + bad[:9]:
        assert oracle(MACHINE, t) == (t in good), t
    assert all(match(MACHINE, good))
    assert not any(match(MACHINE, bad))


def random_schema(rng):
    """Two to four object definitions whose members refer to a union of
    some of them (the union itself a definition or written inline), with
    or without a tag. Each definition names members of its own (a0, b0 in
    d0; a1, b1 in d1): where two branches' members at one key held
    different calls, the union's automaton would merge them, which no
    branch-level choice resolves (the flat fallback applies, as before).
    Closed objects for the same reason (an open object's extra member is a
    free-form call), and anyOf only (an overlapping oneOf is a difference,
    which keeps recursion flat; the disjoint oneOf is EXCEPTION's)."""
    names = [f"d{i}" for i in range(rng.randint(2, 4))]
    defs = {}

    def union():
        refs = [{"$ref": f"#/$defs/{n}"} for n in rng.sample(names, rng.randint(2, len(names)))]
        if rng.random() < 0.3:
            refs.append({"type": rng.choice(["string", "integer"])})
        return {"$ref": "#/$defs/u"} if rng.random() < 0.5 else {"anyOf": refs}

    for i, n in enumerate(names):
        props = {"n": {"type": "integer"}, "tag": {"const": n} if rng.random() < 0.7 else {"type": "string"}}
        for key in (f"a{i}", f"b{i}"):
            props[key] = rng.choice([union(), union(), {"type": "array", "items": union()}, {"type": "integer"}])
        d = {"type": "object", "properties": props, "additionalProperties": False}
        if rng.random() < 0.5:
            d["required"] = ["tag"]
        defs[n] = d
    defs["u"] = {"anyOf": [{"$ref": f"#/$defs/{n}"} for n in names]}
    return {"$schema": DRAFT, "$defs": defs, **union()}, names


def random_value(rng, names, depth):
    if depth == 0 or rng.random() < 0.25:
        return rng.choice([1, "s", {"n": 1}, {"tag": rng.choice(names)}, {}])
    v = {}  # keys in the definitions' order (sieve's default key order)
    if rng.random() < 0.5:
        v["n"] = rng.choice([1, "x"])
    if rng.random() < 0.8:
        v["tag"] = rng.choice(names)
    i = rng.randrange(len(names) + 1)  # one definition's members, or another's
    for key in (f"a{i}", f"b{i}"):
        if rng.random() < 0.6:
            sub = random_value(rng, names, depth - 1)
            v[key] = [sub] if rng.random() < 0.5 else sub
    return v


def test_random_recursive_unions_agree_with_jsonschema():
    rng = random.Random(1204)
    compiled = whole = 0
    for _ in range(40):
        schema, names = random_schema(rng)
        r = run("compile", schema)
        if r.returncode != 0:
            assert json.loads(r.stdout)["error"]["type"] in ("empty", "budget", "unsupported"), r.stdout
            continue
        compiled += 1
        whole += not json.loads(r.stdout)["recursion_truncated"]
        texts = sorted({json.dumps(random_value(rng, names, 4)) for _ in range(40)})
        assert_agrees(schema, texts)
    assert compiled >= 30 and whole >= 20, (compiled, whole)
