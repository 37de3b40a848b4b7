"""allOf of plain objects merged into one object (fsm/schema.c,
merge_allof), checked against Python's jsonschema.

When every conjunct (the schema, its allOf branches, their $ref targets)
uses only type "object", properties and required (besides annotations),
the allOf compiles as one object: each key's value meets every conjunct
that names it, the required keys are the union. No product is built, so
free-form values stay calls and nest to any depth.

- Random allOfs of open objects, with $refs, nested allOf, keys named by
  several conjuncts and required keys defined by another conjunct: `sieve
  match` agrees with jsonschema on every instance, in both key orders.
- Conjuncts the merge must not take (additionalProperties, another type,
  minProperties, a pattern beside) keep the exact product: every accepted
  instance is valid, and the ones the extra keyword forbids are refused.
- Free-form values nest 40 levels deep under a merged allOf; before, the
  product cut them at the bounded depth.
"""
import json
import random

from suite import compile_stats as stats, oracle, sieve_match as match

DRAFT = "https://json-schema.org/draft/2020-12/schema"

VALUES = {
    "n": ({"type": "integer", "minimum": 0}, [0, 3], [-1, "3"]),
    "s": ({"type": "string", "maxLength": 3}, ["", "ab"], ["abcd", 1]),
    "b": ({"type": "boolean"}, [True], ["no"]),
    "o": ({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
          [{"x": 1}, {"x": 2, "y": [1, {"z": None}]}], [{"y": 1}, {"x": "1"}]),
    "e": ({"enum": ["p", "q"]}, ["p"], ["r"]),
    "f": ({}, [1, "x", [1, [2]], {"a": {"b": [None]}}], []),
}


def conjunct(rng, keys):
    props = {}
    for k in keys:
        props[k] = VALUES[k][0]
    c = {"properties": props}
    if rng.random() < 0.5:
        c["type"] = "object"
    req = [k for k in keys if rng.random() < 0.4]
    if rng.random() < 0.2:
        req.append(rng.choice(list(VALUES)))  # maybe defined by another conjunct only
    if req:
        c["required"] = sorted(set(req), key=req.index)
    return c


def random_schema(rng):
    keys = list(VALUES)
    parts = [conjunct(rng, rng.sample(keys, rng.randint(1, 3))) for _ in range(rng.randint(2, 4))]
    defs = {}
    branches = []
    for i, p in enumerate(parts[1:]):
        if rng.random() < 0.4:
            defs[f"D{i}"] = p
            branches.append({"$ref": f"#/$defs/D{i}"})
        else:
            branches.append(p)
    if len(branches) >= 2 and rng.random() < 0.3:  # nested allOf
        branches = [branches[0], {"allOf": branches[1:]}]
    schema = {"$schema": DRAFT, **parts[0], "allOf": branches}
    if defs:
        schema["$defs"] = defs
    return schema


def instances(rng, n):
    out = []
    for _ in range(n):
        inst = {}
        for k, (_, good, bad) in VALUES.items():
            r = rng.random()
            if r < 0.55:
                inst[k] = rng.choice(good)
            elif r < 0.65 and bad:
                inst[k] = rng.choice(bad)
        if rng.random() < 0.15:
            inst["extra"] = [1, {"k": "v"}]
        out.append(inst)
    return out


def text(inst, keys):
    return "{" + ", ".join(json.dumps(k) + ": " + json.dumps(inst[k]) for k in keys) + "}"


def test_merged_allof_agrees_with_jsonschema():
    rng = random.Random(20261203)
    checked = accepted = 0
    for case in range(40):
        schema = random_schema(rng)
        st = stats(schema)
        assert "calls" not in st["narrowed_by_budget"], (case, st)
        insts = instances(rng, 40)
        # keys in any order: objects of up to 16 keys take any order exactly
        texts = [text(i, rng.sample(list(i), len(i))) for i in insts]
        got = match(schema, texts, "--key-order", "any")
        for t, g in zip(texts, got):
            assert g == oracle(schema, t), (case, json.dumps(schema), t, g)
        checked += len(texts)
        accepted += sum(got)
        # schema order: every accepted instance is valid
        got = match(schema, texts)
        for t, g in zip(texts, got):
            if g:
                assert oracle(schema, t), (case, json.dumps(schema), t)
        non_objects = ["1", '"x"', "null", "[]"]
        assert match(schema, non_objects) == [oracle(schema, t) for t in non_objects], json.dumps(schema)
    assert checked == 1600 and 0.05 * checked < accepted < 0.9 * checked, accepted


def test_conjuncts_that_do_not_merge_stay_exact():
    base = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    cases = [
        # a closed conjunct: b is extra to it, so forbidden
        ({"allOf": [base, {"properties": {"a": {"minimum": 1}}, "additionalProperties": False}]},
         ['{"a": 1}', '{"a": 1, "b": "x"}', '{"a": 0}'], [True, False, False]),
        # another type beside
        ({"allOf": [base, {"type": ["object", "null"]}]}, ['{"a": 1}', "null"], [True, False]),
        # a count of properties
        ({"allOf": [base, {"minProperties": 2}]}, ['{"a": 1}', '{"a": 1, "b": "x"}'], [False, True]),
        # a keyword for strings beside (applies to strings only: objects pass)
        ({"allOf": [{"properties": {"a": {"type": "integer"}}}, {"maxLength": 2}]}, ['{"a": 1}', '"abc"', '"ab"'],
         [True, False, True]),
    ]
    for schema, texts, want in cases:
        got = match(schema, texts)
        assert got == want == [oracle(schema, t) for t in texts], (json.dumps(schema), got)


def nested(depth):
    v = {"leaf": True}
    for d in range(depth):
        v = {"k": [v, d]}
    return v


def test_free_form_values_nest_under_a_merged_allof():
    schema = {"$schema": DRAFT, "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "integer"}},
                                                   "required": ["id"]}},
              "allOf": [{"$ref": "#/$defs/Base"},
                        {"properties": {"meta": {}, "tags": {"type": "array", "items": {"type": "string"}}}}]}
    st = stats(schema)
    assert st["narrowed_by_budget"] == [], st
    deep = json.dumps({"id": 1, "meta": nested(40)})
    broken = deep.replace('"leaf": true', '"leaf": tru')
    texts = [deep, json.dumps({"id": 1, "meta": nested(40), "tags": ["a"]}), json.dumps({"meta": nested(3)}),
             json.dumps({"id": "1", "meta": {}}), broken]
    got = match(schema, texts)
    assert got == [oracle(schema, t) for t in texts] == [True, True, False, False, False], got


ALL_TYPES = ["array", "boolean", "integer", "null", "number", "object", "string"]


def dap(untyped_body):
    """A trimmed VS Code Debug Protocol: an event's base types `body` as
    every JSON type (an untyped payload) and each event names its own."""
    event_props = {"type": {"enum": ["event"]}, "event": {"type": "string"}}
    if untyped_body:
        event_props["body"] = {"type": ALL_TYPES, "description": "Event-specific information."}
    defs = {
        "Msg": {"type": "object", "properties": {"seq": {"type": "integer"}, "type": {"type": "string"}},
                "required": ["seq", "type"]},
        "Event": {"allOf": [{"$ref": "#/$defs/Msg"},
                            {"type": "object", "properties": event_props, "required": ["type", "event"]}]},
        "Src": {"type": "object", "properties": {"name": {"type": "string"}, "adapterData": {"type": ALL_TYPES},
                                                 "sources": {"type": "array", "items": {"$ref": "#/$defs/Src"}}}},
        "Bp": {"type": "object", "properties": {"id": {"type": "integer"}, "source": {"$ref": "#/$defs/Src"}},
               "required": ["id"]},
        "BpEvent": {"allOf": [{"$ref": "#/$defs/Event"},
                              {"type": "object", "properties": {
                                  "event": {"enum": ["breakpoint"]},
                                  "body": {"type": "object", "properties": {"reason": {"type": "string"},
                                                                            "breakpoint": {"$ref": "#/$defs/Bp"}},
                                           "required": ["reason", "breakpoint"]}},
                               "required": ["event", "body"]}]},
    }
    return {"$schema": DRAFT, "$defs": defs, "$ref": "#/$defs/BpEvent"}


def test_a_member_that_accepts_everything_adds_nothing():
    # The merged `body` meets nothing with the list of every type: it
    # compiles as the event's own body, the same automaton as without the
    # base's `body` (before, a product with the free-form value: 7,707
    # states against 735 here).
    a, b = stats(dap(True)), stats(dap(False))
    for k in ("states", "byte_classes", "forced_states", "min_len", "parts"):
        assert a[k] == b[k], (k, a, b)
    schema = dap(True)
    src = {"name": "a", "adapterData": [1, {"x": None}]}
    for _ in range(12):
        src = {"name": "s", "sources": [src, {"adapterData": "z"}]}
    ok = {"seq": 1, "type": "event", "event": "breakpoint", "body": {"reason": "new", "breakpoint": {"id": 3,
                                                                                                      "source": src}}}
    texts = [json.dumps(ok), json.dumps(dict(ok, body={"reason": "new", "breakpoint": {"id": 3}})),
             json.dumps(dict(ok, body=None)), json.dumps(dict(ok, body=7)), json.dumps(dict(ok, event="stopped")),
             json.dumps({k: v for k, v in ok.items() if k != "body"}),
             json.dumps(ok).replace('"name": "a"', '"name": 1')]
    got = match(schema, texts)
    assert got == [oracle(schema, t) for t in texts] == [True, True, False, False, False, False, False], got
    # A list that leaves one type out still constrains: no null body here.
    # (Without "integer" the list still takes every value: number covers it.)
    for missing in ALL_TYPES:
        part = {"$schema": DRAFT, "allOf": [{"properties": {"b": {"type": [t for t in ALL_TYPES if t != missing]}}},
                                            {"properties": {"b": {}}}]}
        vals = {"array": "[]", "boolean": "true", "null": "null", "number": "1.5", "object": "{}", "string": '"x"'}
        texts = ['{"b": %s}' % v for v in vals.values()] + ['{"b": 7}']
        got = match(part, texts)
        assert got == [oracle(part, t) for t in texts], (missing, got)
        assert got.count(False) == (0 if missing == "integer" else 1), (missing, got)
