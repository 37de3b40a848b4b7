"""Free-form values as calls inside products (fsm/program_product.c),
checked against Python's jsonschema.

Inside `not`, `oneOf`, `if`/`then`/`else`, `allOf` and `contains`, a
free-form value (`{}`, an absent `items`, the members no `properties`
names) is a call into the free-form part, as it is outside them, and so is
the canonical universe at locations no schema names. A product keeps the
calls both sides make; where one side spells values out and the other
calls, the call is expanded as deep as the spelled-out side goes. Before,
every free-form value in a product was the bounded shape, and instances
nested deeper than it were refused (MaskBench's "nesting" validation
errors).

- Random schemas of those keywords over small pieces (free-form values,
  objects with a typed or free member, arrays of objects or strings) and
  random values nested up to 7 levels: `sieve match` agrees with jsonschema
  on every instance. No invalid instance is accepted, no valid one refused.
- Free-form values 50 levels deep under each keyword are accepted, and
  the same texts broken at any depth (a bracket closed by the wrong kind,
  one missing) are refused.
- The compile keeps calls: such schemas compile to far fewer states than
  with flat free-form values (`--any-calls false`).
"""
import json
import random

import pytest

from suite import assert_agrees, nested, oracle, sieve as run, sieve_match as match

DRAFT = "https://json-schema.org/draft/2020-12/schema"

PIECES = [
    {},
    {"type": "object"},
    {"type": "array"},
    {"type": "string"},
    {"type": "object", "properties": {"a": {"type": "integer"}}},
    {"type": "object", "properties": {"a": {}}, "required": ["a"]},
    {"properties": {"a": {"type": "array", "items": {"type": "object"}}}},
    {"properties": {"a": {"not": {"type": "array"}}}},
    {"properties": {"b": {"type": "object", "properties": {"a": {"type": "null"}}}}},
    {"type": "array", "items": {"type": "string"}},
    {"type": "array", "items": {"type": "object", "required": ["b"]}},
    {"required": ["b"]},
    {"properties": {"a": {"type": "object", "additionalProperties": {"type": "array"}}}},
]


def piece(rng):
    return json.loads(json.dumps(rng.choice(PIECES)))


def random_schema(rng):
    x, y, z = piece(rng), piece(rng), piece(rng)
    shape = rng.randrange(6)
    if shape == 0:
        s = {"not": x}
    elif shape == 1:
        s = {"if": x, "then": y, "else": z}
    elif shape == 2:
        s = {"oneOf": [x, y]}
    elif shape == 3:
        s = {"allOf": [x, {"not": y}]}
    elif shape == 4:
        s = {"type": "array", "contains": x}
    else:
        s = {"properties": {"a": {"oneOf": [x, y]}, "b": {"not": z}}}
    return {"$schema": DRAFT, **s}


def value(rng, depth):
    r = rng.random()
    if depth <= 0 or r < 0.3:
        return rng.choice([None, True, 1, -2, 1.5, "s", ""])
    if r < 0.65:
        return [value(rng, depth - 1) for _ in range(rng.randint(0, 2))]
    # Keys named by the pieces (a or b) first, then c: sieve keeps one key
    # order per location (the named keys first), and that is not what this
    # test is about.
    keys = [k for k in (rng.choice("ab"), "c") if rng.random() < 0.6]
    return {k: value(rng, depth - 1) for k in keys}


def test_random_products_agree_with_jsonschema():
    rng = random.Random(20261203)
    schemas = 0
    for _ in range(70):
        schema = random_schema(rng)
        r = run("compile", schema)
        if r.returncode != 0:  # unsatisfiable combinations
            assert json.loads(r.stdout)["error"]["type"] != "internal_error", r.stdout
            continue
        schemas += 1
        texts = sorted({json.dumps(value(rng, rng.randint(0, 7))) for _ in range(60)})
        assert_agrees(schema, texts)
    assert schemas >= 50


DEEP = [
    {"not": {"type": "string"}},
    {"if": {"type": "object", "required": ["k"]}, "then": {"properties": {"k": {}}}, "else": {"type": "array"}},
    {"oneOf": [{"type": "array"}, {"type": "object", "required": ["k"]}]},
    {"allOf": [{}, {"not": {"type": "null"}}]},
    {"type": "array", "contains": {"not": {"type": "null"}}},
]


@pytest.mark.parametrize("schema", DEEP, ids=["not", "if", "oneOf", "allOf", "contains"])
def test_deep_free_form_under_products(schema):
    schema = {"$schema": DRAFT, **schema}
    good, bad = [], []
    for depth in (1, 2, 10, 49, 50):
        v = nested(depth)
        if "contains" in schema:
            v = [v]
        text = json.dumps(v)
        good.append(text)
        # broken at every depth: a bracket closed by the other kind, or not closed
        for cut in range(len(text)):
            if text[cut] in "]}":
                bad.append(text[:cut] + ("}" if text[cut] == "]" else "]") + text[cut + 1:])
                bad.append(text[:cut] + text[cut + 1:])
    for t in good:
        assert oracle(schema, t), t
    assert all(match(schema, good)), json.dumps(schema)
    got = match(schema, bad)
    assert not any(g for g in got), [t for t, g in zip(bad, got) if g][:3]
    st = json.loads(run("compile", schema).stdout)
    assert not st["recursion_truncated"]
    assert "calls" not in " ".join(st.get("narrowed_by_budget", []))


def test_calls_keep_products_small():
    schema = {"$schema": DRAFT, "type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "data": {}},
              "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["data"]},
              "else": {"properties": {"data": {"type": "array"}}}}
    calls = json.loads(run("compile", schema).stdout)
    flat = json.loads(run("compile", schema, "--any-calls", "false").stdout)
    assert calls["states"] * 4 < flat["states"], (calls["states"], flat["states"])
    good = [json.dumps({"kind": "a", "data": nested(30)}), json.dumps({"kind": "b", "data": [nested(30)]})]
    bad = [json.dumps({"kind": "a"}), json.dumps({"kind": "b", "data": {"k": 1}})]
    assert match(schema, good) == [True, True]
    assert match(schema, bad) == [False, False]


def spelled(depth):
    """A schema that spells `depth` containers (arrays and objects in turn)
    around an integer, and a value of it."""
    s, v = {"type": "integer"}, 1
    for i in range(depth):
        if i % 2 == 0:
            s, v = {"type": "array", "items": s}, [v]
        else:
            s, v = {"type": "object", "properties": {"k": s}, "required": ["k"]}, {"k": v}
    return s, v


@pytest.mark.parametrize("depth", [3, 5, 8])
def test_overlapping_oneof_keeps_spelled_containers(depth):
    # The branches overlap (an object with both "c" and "g" is in both), so
    # the oneOf is a difference over the canonical universe. Branch 0's own
    # containers under "c" go deeper than the free-form depth; the universe
    # used to stop there and cut them (o63308, GeoJSON's coordinates).
    s, v = spelled(depth)
    schema = {"$schema": DRAFT, "oneOf": [
        {"type": "object", "properties": {"c": s}, "required": ["c"]},
        {"type": "object", "required": ["g"]}]}
    wrong = json.loads(json.dumps(v).replace("1", '"x"'))
    texts = [json.dumps(x) for x in (
        {"c": v},                 # branch 0 only
        {"g": 1},                 # branch 1 only
        {"c": "x", "g": 1},       # branch 1 only: c breaks branch 0
        {"c": v, "g": 1},         # both: invalid
        {"c": wrong},             # neither
        {"c": wrong, "g": v},     # branch 1 only, its free-form value as deep as c's
    )]
    assert [oracle(schema, t) for t in texts] == [True, True, True, False, False, True]
    assert_agrees(schema, texts)
    # With flat free-form values (bounded), the universe keeps the
    # free-form depth: a deeper one would outrun branch 1's "c", and the
    # difference would keep a value that both branches hold.
    assert match(schema, [texts[3]], "--any-calls", "false") == [False]


def test_oneof_subtracts_only_overlapping_branches():
    # Three branches: 0 and 1 are apart (different tags), 2 overlaps both. The
    # result is exact either way; the branches apart from each other are
    # not subtracted from each other.
    schema = {"$schema": DRAFT, "oneOf": [
        {"type": "object", "properties": {"t": {"const": "a"}, "v": {"type": "array", "items": {"type": "array"}}},
         "required": ["t"]},
        {"type": "object", "properties": {"t": {"const": "b"}}, "required": ["t"]},
        {"type": "object", "required": ["w"]}]}
    texts = [json.dumps(x) for x in (
        {"t": "a"}, {"t": "b"}, {"w": 1}, {"t": "a", "w": 1}, {"t": "b", "w": 1}, {"t": "c", "w": 1},
        {"t": "a", "v": [[[[1]]]]}, {"t": "a", "v": [1]}, {"t": "c"}, {"t": "a", "v": [[[[1]]]], "w": 1})]
    assert_agrees(schema, texts)
