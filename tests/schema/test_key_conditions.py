"""Key conditions: a `not` or a dependency over key requirements, checked
against Python's jsonschema.

A `not` whose schema names keys only (`required` lists under `allOf`,
`anyOf`, `oneOf` and `not`, and `"type": "object"`) says which key sets an
object may hold: "not both cmd and args", "not ios", "at most one of these".
sieve compiles it as a few bits in the object's automaton (a presence bit a
key it names, and a table of the key sets that meet it:
`fsm/schema_container.c`, docs/fsm.md "Key conditions"), not as the
difference from the canonical universe, which spelled every value at the
location out to the free-form depth and refused deeper valid data.

- Random conditions over four keys (under `not`, and as the schemas of
  `dependentSchemas`: "an object with k holds these keys"), beside random
  object schemas and on their own, and random instances (objects holding any subset of the keys,
  values of the right type or not, extra keys, non-objects): `sieve match`
  agrees with jsonschema on every one.
- An `anyOf` or `oneOf` whose branches name keys only ("a radius, or a
  length and a width, or a base and a height") is such a condition too,
  not a union met in a product: random ones, in both key orders (`--key-order
  any` with the instances' keys shuffled), agree with jsonschema, and values
  beside them nest 50 deep.
- Members of such an object keep free-form values as calls, and named
  members their own languages: values nested 50 deep, and free-form values
  under named objects four levels down (which the universe cut at three),
  are accepted, and the same texts broken refused.
"""
import json
import random

from suite import assert_agrees, nested, oracle, sieve as run, sieve_match as match

DRAFT = "https://json-schema.org/draft/2020-12/schema"
KEYS = "abcd"


def condition(rng, depth=0):
    """A random schema that names keys only."""
    r = rng.random()
    if depth >= 2 or r < 0.4:
        c = {"required": rng.sample(KEYS, rng.randint(1, 2))}
        if rng.random() < 0.1:
            c["type"] = "object"
        return c
    kw = rng.choice(["allOf", "anyOf", "oneOf", "not"])
    if kw == "not":
        return {"not": condition(rng, depth + 1)}
    return {kw: [condition(rng, depth + 1) for _ in range(rng.randint(1, 3))]}


def object_schema(rng):
    props = {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {}, "d": {"type": "array"}}
    s = {"type": "object", "properties": props}
    if rng.random() < 0.5:
        s["required"] = rng.sample("ab", rng.randint(0, 1))
    r = rng.random()
    if r < 0.3:
        s["additionalProperties"] = False
    elif r < 0.5:
        s["additionalProperties"] = {"type": "null"}
    return s


def instance(rng):
    r = rng.random()
    if r < 0.1:
        return rng.choice([None, 1, "s", [], [1]])
    values = {"a": [3, -1, "x"], "b": ["s", 2], "c": [None, {"k": [1]}, [[]]], "d": [[], [1, "x"], {}], "e": [None, 1]}
    # keys in the order sieve writes them (the properties' order, extras last)
    return {k: rng.choice(values[k]) for k in "abcde" if rng.random() < 0.5}


def test_random_key_conditions_agree_with_jsonschema():
    rng = random.Random(20261203)
    compiled = 0
    for i in range(80):
        cond = condition(rng)
        # The properties name the keys in the order instances write them
        # (sieve keeps one key order per location, named keys first).
        schema = {"$schema": DRAFT, "properties": {k: {} for k in KEYS}, "not": cond}
        if i % 4:
            schema.update(object_schema(rng))
        if i % 3 == 0:
            schema["dependentSchemas"] = {k: condition(rng, 1) for k in rng.sample(KEYS, rng.randint(1, 2))}
            if i % 2:
                del schema["not"]
        r = run("compile", schema)
        if r.returncode != 0:
            err = json.loads(r.stdout)["error"]
            assert err["type"] == "empty", (json.dumps(schema), r.stdout)
            continue
        compiled += 1
        texts = sorted({json.dumps(instance(rng)) for _ in range(80)})
        assert_agrees(schema, texts)
    assert compiled >= 60


def test_members_beside_a_key_condition_nest_to_any_depth():
    # "not both cmd and args", as Marathon's app schema writes it
    schema = {"$schema": DRAFT, "type": "object", "additionalProperties": False,
              "properties": {"cmd": {"type": "string"}, "args": {"type": "array"}, "labels": {}, "env": {"type": "object"},
                             "container": {"type": "object", "properties": {"docker": {"type": "object", "properties": {
                                 "ports": {"type": "array", "items": {"type": "object", "properties": {
                                     "port": {"type": "integer"}, "extra": {}}}}}}}}},
              "not": {"allOf": [{"required": ["cmd"]}, {"required": ["args"]}]}}
    good = [json.dumps({"cmd": "x", "labels": nested(d)}) for d in (1, 10, 50)] + \
           [json.dumps({"args": [nested(50)], "env": {"k": nested(49)}}),
            json.dumps({"cmd": "x", "container": {"docker": {"ports": [{"port": 80, "extra": [[{"k": [1]}]]}]}}})]
    bad = [json.dumps({"cmd": "x", "args": [], "labels": 1})]
    for t in good:
        cut = t.rfind("]")
        bad.append(t[:cut] + "}" + t[cut + 1:])
        bad.append(t[:cut] + t[cut + 1:])
    for t in good:
        assert oracle(schema, t), t
    for t in bad:
        assert not oracle(schema, t), t
    assert all(match(schema, good))
    assert not any(match(schema, bad))
    st = json.loads(run("compile", schema).stdout)
    assert "calls" not in " ".join(st.get("narrowed_by_budget", []))


def test_not_required_alone_is_objects_without_the_key():
    schema = {"$schema": DRAFT, "not": {"required": ["x"]}}
    texts = ['{"y": 1}', '{}', '{"x": 1}', '{"y": [1], "x": 2}', '1', '"s"', 'null', '[]']
    assert match(schema, texts) == [oracle(schema, t) for t in texts] == \
        [True, True, False, False, False, False, False, False]


def test_random_positive_key_conditions_agree_with_jsonschema():
    rng = random.Random(20261204)
    compiled = 0
    for i in range(80):
        kw = "anyOf" if i % 2 else "oneOf"
        branches = [condition(rng, 1) for _ in range(rng.randint(2, 3))]
        schema = {"$schema": DRAFT, "properties": {k: {} for k in KEYS}, kw: branches}
        if i % 4:
            schema.update(object_schema(rng))
        if i % 5 == 0:
            schema["not"] = condition(rng, 1)
        if i % 7 == 0:
            schema["dependentRequired"] = {"a": ["b"]}
        any_order = i % 3 == 0
        r = run("compile", schema)
        if r.returncode != 0:
            err = json.loads(r.stdout)["error"]
            assert err["type"] == "empty", (json.dumps(schema), r.stdout)
            continue
        compiled += 1
        texts = set()
        for _ in range(80):
            x = instance(rng)
            if any_order and isinstance(x, dict):
                items = list(x.items())
                rng.shuffle(items)
                x = dict(items)
            texts.add(json.dumps(x))
        assert_agrees(schema, sorted(texts), *(["--key-order", "any"] if any_order else []))
    assert compiled >= 60


def test_values_beside_a_positive_key_condition_nest_to_any_depth():
    # calculate_area, as function-calling sets write it
    schema = {"$schema": DRAFT, "type": "object",
              "properties": {"shape": {"enum": ["circle", "rectangle", "triangle"]}, "radius": {"type": "number"},
                             "length": {"type": "number"}, "width": {"type": "number"},
                             "base": {"type": "number"}, "height": {"type": "number"}, "meta": {}},
              "required": ["shape"],
              "oneOf": [{"required": ["radius"]}, {"required": ["length", "width"]}, {"required": ["base", "height"]}]}
    good = ['{"radius": 1, "shape": "circle"}', '{"shape": "rectangle", "length": 2, "width": 3}',
            '{"base": 1, "height": 2, "shape": "triangle", "length": 4}',
            json.dumps({"shape": "circle", "radius": 1, "meta": nested(50)})]
    bad = ['{"shape": "circle"}', '{"radius": 1}', '{"shape": "circle", "radius": 1, "length": 1, "width": 2}',
           '{"shape": "rectangle", "length": 2}', '1', json.dumps({"shape": "circle", "radius": 1, "meta": nested(50)})[:-2] + "}"]
    for t in good:
        assert oracle(schema, t), t
    for t in bad:
        assert not oracle(schema, t), t
    assert all(match(schema, good, "--key-order", "any"))
    assert not any(match(schema, bad, "--key-order", "any"))
    st = json.loads(run("compile", schema).stdout)
    assert "calls" not in " ".join(st.get("narrowed_by_budget", []))
