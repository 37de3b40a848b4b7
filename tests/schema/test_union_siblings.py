"""What stands beside a union, and schemas met twice, checked against
Python's jsonschema.

- A union beside a `type` that every branch's own type already implies
  (`{"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}], "type":
  "object"}`, as generators write it) compiles as the union alone: the type
  adds nothing, and meeting it in a product made the union flat, so a
  recursive `$ref` inside was cut at max_ref_depth. Random unions and
  types agree with jsonschema, whether or not the type is implied.
- A member whose `properties` entry and a matching `patternProperties`
  entry are the same schema (annotations aside) takes it once: no product,
  so a recursion inside keeps its call.
- Both recursive shapes accept trees 50 levels deep and refuse them broken
  at any level.
"""
import json
import random

from suite import assert_agrees, nested, oracle, sieve as run, sieve_match as match

DRAFT = "https://json-schema.org/draft/2020-12/schema"

BRANCHES = {
    "obj": {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]},
    "obj2": {"type": "object", "properties": {"w": {"type": "string"}}, "additionalProperties": False},
    "str": {"type": "string", "maxLength": 3},
    "int": {"type": "integer"},
    "null": {"type": "null"},
    "any": {"properties": {"v": {"type": "string"}}},
}
TYPES = ["object", ["object", "null"], "string", "number", ["string", "integer"]]


def random_schema(rng):
    names = rng.sample(sorted(BRANCHES), rng.randint(1, 3))
    union = [{"$ref": f"#/$defs/{n}"} if rng.random() < 0.7 else BRANCHES[n] for n in names]
    kw = rng.choice(["anyOf", "anyOf", "oneOf"])
    return {"$schema": DRAFT, "$defs": BRANCHES, kw: union, "type": rng.choice(TYPES)}


def instance(rng):
    return rng.choice([{"v": 1}, {"v": "s"}, {"w": "s"}, {}, {"v": 1, "w": "s"}, "ab", "abcd", 3, 2.5, None, True, []])


def test_random_unions_beside_a_type_agree_with_jsonschema():
    rng = random.Random(1203)
    compiled = 0
    for _ in range(60):
        schema = random_schema(rng)
        r = run("compile", schema)
        if r.returncode != 0:
            assert json.loads(r.stdout)["error"]["type"] in ("empty", "unsupported"), r.stdout
            continue
        compiled += 1
        texts = sorted({json.dumps(instance(rng)) for _ in range(30)})
        assert_agrees(schema, texts)
    assert compiled >= 45


def tree(depth):
    v = {"v": 0}
    for _ in range(depth):
        v = {"kids": [v, "leaf"]}
    return v


def check_deep(schema, make, oracle_depth=50):
    """Trees 1, 5 and 50 deep accepted and broken ones refused; jsonschema
    checks the texts of trees up to oracle_depth deep (it validates a value
    once per schema that applies, which doubles a level where two do)."""
    good = [json.dumps(make(d)) for d in (1, 5, 50)]
    bad = []
    for t in good:
        for cut in (t.find("]"), t.rfind("]")):
            bad.append(t[:cut] + "}" + t[cut + 1:])
    bad.append(good[-1].replace('{"v": 0}', '{"v": "0"}'))
    bad.append(good[-1].replace('"leaf"', '"leaf-too-long"', 1))
    for t in good + bad:
        if t.count("[") <= oracle_depth:
            assert oracle(schema, t) == (t in good), t
    assert all(match(schema, good)), json.dumps(schema)
    assert not any(match(schema, bad))
    st = json.loads(run("compile", schema).stdout)
    assert not st["recursion_truncated"], st


def test_recursion_under_a_union_beside_an_implied_type():
    schema = {"$schema": DRAFT, "$ref": "#/$defs/node", "$defs": {
        "node": {"type": "object", "additionalProperties": False, "properties": {
            "kids": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/node"}, {"$ref": "#/$defs/leaf"}],
                                                "type": ["object", "string"]}},
            "v": {"type": "integer"}}},
        "leaf": {"type": "string", "maxLength": 8}}}
    check_deep(schema, tree)


def test_a_schema_met_twice_at_a_member_is_taken_once():
    kids = {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/node"}, {"$ref": "#/$defs/leaf"}]}}
    schema = {"$schema": DRAFT, "$ref": "#/$defs/node", "$defs": {
        "node": {"type": "object",
                 "properties": {"kids": {"description": "the children", **kids}, "v": {"type": "integer"}},
                 "patternProperties": {"^k[a-z]*$": kids}},
        "leaf": {"type": "string", "maxLength": 8}}}
    check_deep(schema, tree, oracle_depth=8)
