"""--key-order any: object keys in any order, each at most once, checked
against Python's jsonschema.

- Random small object schemas (required keys, dependentRequired,
  min/maxProperties, additionalProperties false / true / a schema, nested
  objects): instances with their keys shuffled, values valid or not, extra
  keys, and a declared key written twice. `sieve match --key-order any` must
  agree with jsonschema on every one (a duplicate key is invalid; extra
  keys, which no automaton can tell apart, are generated distinct).
- Samples validate, have no duplicate key, and come in several orders.
- The default (`schema`) keeps the schema's order. An object with more keys
  than its key sets allow keeps its set in the walk (key_set_frames); one
  that also counts its members keeps the schema's order for its declared
  keys (extra keys may come anywhere) and says so (key_order_narrowed).
- Where differences (oneOf, not) meet, accepted instances stay valid, and
  objects there take every order too (or all keep the schema's, said so).
- Wide objects keep key conditions that writing a key can break (`not`,
  oneOf and anyOf of required keys) in the walk.
- Draft 7's array-form `dependencies` keep key sets, as dependentRequired does.
"""
import itertools
import json
import random

import jsonschema

import suite
from suite import compile_stats as stats, no_duplicates, oracle, sieve as run, sieve_match as match

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def spell(v, rng):
    """v as json.dumps would write it, with every object's keys shuffled."""
    if isinstance(v, dict):
        keys = list(v)
        rng.shuffle(keys)
        return "{" + ", ".join(json.dumps(k) + ": " + spell(v[k], rng) for k in keys) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(spell(x, rng) for x in v) + "]"
    return json.dumps(v)


VALUE_TYPES = [
    ({"type": "integer", "minimum": 0}, lambda r: r.randint(0, 9), lambda r: r.choice([-1, "x", None])),
    ({"type": "string", "maxLength": 3}, lambda r: r.choice(["", "a", "xyz"]), lambda r: r.choice(["long!", 3])),
    ({"type": "boolean"}, lambda r: r.choice([True, False]), lambda r: r.choice(["true", 0])),
    ({"enum": ["red", "green"]}, lambda r: r.choice(["red", "green"]), lambda r: "blue"),
]


def random_object(rng, depth=0):
    """(schema, make(valid) -> an instance): a random object schema."""
    n = rng.randint(2, 6)
    names = rng.sample(["id", "name", "kind", "size", "tags", "x", "y", "note", "ok"], n)
    props, makers = {}, {}
    for k in names:
        if depth == 0 and rng.random() < 0.25:
            sub, mk = random_object(rng, depth + 1)
            props[k] = sub
            makers[k] = mk
        else:
            s, good, bad = rng.choice(VALUE_TYPES)
            props[k] = dict(s)
            makers[k] = (lambda good, bad: lambda r, ok: good(r) if ok else bad(r))(good, bad)
    schema = {"type": "object", "properties": props}
    req = [k for k in names if rng.random() < 0.5]
    if req:
        schema["required"] = req
    if rng.random() < 0.3:
        a, b = rng.sample(names, 2)
        schema["dependentRequired"] = {a: [b]}
    ap = rng.choice([False, True, {"type": "integer"}, None])
    if ap is not None:
        schema["additionalProperties"] = ap
    if rng.random() < 0.25:
        schema["maxProperties"] = rng.randint(len(req), n + 1)
    if rng.random() < 0.25:
        schema["minProperties"] = rng.randint(0, min(n, len(req) + 2))

    def make(r, valid):
        keys = [k for k in names if k in req or r.random() < 0.5]
        inst = {k: makers[k](r, valid or r.random() < 0.7) for k in keys}
        if r.random() < 0.3:
            inst["extra" + str(r.randint(0, 9))] = r.choice([1, "s", [1], {"q": 2}])
        if not valid and r.random() < 0.3 and keys:
            del inst[r.choice(keys)]
        return inst
    return schema, make


def test_random_objects_agree_with_jsonschema():
    rng = random.Random(20261201)
    checked = accepted = 0
    for case in range(40):
        schema, make = random_object(rng)
        schema = {"$schema": DRAFT, **schema}
        st = stats(schema, "--key-order", "any")
        assert st["key_order_narrowed"] == 0 and st["narrowed_by_budget"] == [], (schema, st)
        texts = []
        for _ in range(40):
            texts.append(spell(make(rng, rng.random() < 0.6), rng))
        # a declared key written twice
        inst = make(rng, True)
        if inst:
            k = next(iter(inst))
            body = spell(inst, rng)[1:-1]
            texts.append("{" + body + ", " + json.dumps(k) + ": " + json.dumps(inst[k]) + "}")
        got = match(schema, texts, "--key-order", "any")
        for t, g in zip(texts, got):
            assert g == oracle(schema, t), (case, json.dumps(schema), t, g)
        checked += len(texts)
        accepted += sum(got)
    assert checked > 1500 and 0.2 * checked < accepted < 0.9 * checked, (checked, accepted)


def test_every_order_of_a_required_set():
    props = {k: {"type": "integer"} for k in "abcde"}
    schema = {"type": "object", "properties": props, "required": list("abcde"), "additionalProperties": False}
    perms = ["{" + ", ".join(f'"{k}": 1' for k in p) + "}" for p in itertools.permutations("abcde")]
    assert all(match(schema, perms, "--key-order", "any"))
    # the default keeps the schema's order (and the few orders real data follows)
    got = match(schema, perms)
    assert got[0] and sum(got) < 5
    # each key once, all required
    assert not any(match(schema, ['{"a": 1, "b": 1, "c": 1, "d": 1}', '{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "a": 1}',
                                  '{"e": 1, "d": 1, "c": 1, "b": 1, "b": 1, "a": 1}'], "--key-order", "any"))


def test_samples_are_valid_and_vary():
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}, "age": {"type": "integer"},
                                               "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                                               "where": {"type": "object", "properties": {"lat": {"type": "number"},
                                                                                          "lon": {"type": "number"}},
                                                         "required": ["lat", "lon"], "additionalProperties": False}},
              "required": ["name", "age", "where"], "additionalProperties": False}
    r = run("sample", schema, "--key-order", "any", "-n", "60", "--seed", "5", "--max-len", "400")
    assert r.returncode == 0, r.stderr
    v = jsonschema.Draft202012Validator(schema)
    orders, inner = set(), set()
    for line in r.stdout.splitlines():
        text = json.loads(line)
        doc = json.loads(text, object_pairs_hook=no_duplicates)
        assert v.is_valid(doc), text
        orders.add(tuple(doc))
        inner.add(tuple(doc["where"]))
    assert len(orders) >= 4 and len(inner) == 2, (orders, inner)
    d = run("sample", schema, "-n", "20", "--seed", "5", "--max-len", "400")
    # the default: the schema's order, or the required keys first
    assert {tuple(json.loads(json.loads(x))) for x in d.stdout.splitlines()} <= {
        ("name", "age", "tags", "where"), ("name", "age", "where"), ("name", "age", "where", "tags")}


def test_wide_objects_keep_their_key_set_in_the_walk():
    """An object with more keys than an automaton of key sets holds (2^n
    states) keeps the set of keys written in the walk (program.c, "Key
    sets"): any order, each declared key once, every required key before
    the close, checked against jsonschema on shuffled instances, keys
    written twice, missing and unknown keys, with keys that are prefixes of
    one another and extra keys of a schema; samples are valid and vary."""
    rng = random.Random(20261207)
    keys = [f"field_{i:02d}" for i in range(20)] + ["n", "name", "names", "namespace"]
    props = {k: ({"type": "integer"} if i % 3 else {"type": "string", "maxLength": 4}) for i, k in enumerate(keys)}
    props["field_05"] = {"type": "object", "properties": {f"in_{i}": {"type": "integer"} for i in range(18)},
                         "required": ["in_3", "in_17"], "additionalProperties": False}
    values = {k: (lambda r, s=props[k]: r.randint(0, 9) if s.get("type") == "integer" else "ab") for k in keys}
    values["field_05"] = lambda r: {f"in_{i}": r.randint(0, 3) for i in [3, 17] + r.sample(range(18), 5)}
    for extra in (False, {"type": "string"}):
        schema = {"$schema": DRAFT, "type": "object", "properties": props, "required": ["field_01", "name", "field_05"],
                  "additionalProperties": extra}
        st = stats(schema, "--key-order", "any")
        assert st["key_order_narrowed"] == 0 and st["key_set_frames"] == 2 and st["narrowed_by_budget"] == [], st
        texts = []
        for _ in range(300):
            chosen = [k for k in keys if k in schema["required"] or rng.random() < 0.4]
            inst = {k: values[k](rng) for k in chosen}
            r = rng.random()
            if r < 0.15 and chosen:
                del inst[rng.choice(chosen)]                      # maybe a required key missing
            elif r < 0.25:
                inst["zz" + str(rng.randint(0, 9))] = rng.choice(["s", 1])   # an extra key
            elif r < 0.3:
                inst[rng.choice(keys)] = "long string"           # a bad value
            text = spell(inst, rng)
            if rng.random() < 0.1 and inst:                      # a declared key written twice
                k = rng.choice([k for k in inst if k in props])
                text = text[:-1] + ", " + json.dumps(k) + ": " + json.dumps(inst[k]) + "}"
            texts.append(text)
        got = match(schema, texts, "--key-order", "any")
        want = [oracle(schema, t) for t in texts]
        assert got == want, [(t, g) for t, g, w in zip(texts, got, want) if g != w][:3]
        assert 60 < sum(got) < 290, sum(got)
        r = run("sample", schema, "--key-order", "any", "-n", "40", "--seed", "9", "--max-len", "600")
        assert r.returncode == 0, r.stderr
        v = jsonschema.Draft202012Validator(schema)
        orders = set()
        for line in r.stdout.splitlines():
            doc = json.loads(json.loads(line), object_pairs_hook=no_duplicates)
            assert v.is_valid(doc), line
            orders.add(tuple(k for k in doc if k in schema["required"]))
        # (with extra keys, a byte-uniform walk spells mostly extra keys, and
        # the required ones come from the shortest completion, in one order)
        assert len(orders) >= (4 if extra is False else 1), orders
    # a required key whose value cannot be (a $ref to an unsatisfiable
    # object): no object at all, as in schema order (Github_hard---o10346)
    bad = {"properties": {**{f"k{i}": {"type": "integer"} for i in range(17)}, "inst": {"$ref": "#/$defs/bad"}},
           "required": ["k1", "inst"], "additionalProperties": False,
           "$defs": {"bad": {"type": "object", "required": ["id"], "additionalProperties": False}}}
    r = run("compile", dict(bad, type="object"), "--key-order", "any")
    assert r.returncode == 2 and json.loads(r.stdout)["error"]["type"] == "empty", r.stdout
    r = run("sample", bad, "--key-order", "any", "-n", "30", "--seed", "2")
    assert r.returncode == 0 and not any(json.loads(x).startswith("{") for x in r.stdout.splitlines()), r.stdout
    # the default keeps the schema's order
    canon = "{" + ", ".join(f'"{k}": 1' for k in keys[:3]) + "}"
    swapped = "{" + ", ".join(f'"{k}": 1' for k in [keys[1], keys[0], keys[2]]) + "}"
    plain = {"type": "object", "properties": {k: {"type": "integer"} for k in keys}, "additionalProperties": False}
    assert match(plain, [canon, swapped]) == [True, False]
    assert match(plain, [canon, swapped], "--key-order", "any") == [True, True]


def agrees_and_samples(schema, texts, seed):
    """`sieve match --key-order any` agrees with jsonschema on texts, and
    20 samples are valid without duplicate keys; returns how many texts
    were accepted."""
    got = match(schema, texts, "--key-order", "any")
    want = [oracle(schema, t) for t in texts]
    assert got == want, [(json.dumps(schema), t, g) for t, g, w in zip(texts, got, want) if g != w][:2]
    r = run("sample", schema, "--key-order", "any", "-n", "20", "--seed", str(seed), "--max-len", "300")
    assert r.returncode == 0, r.stderr
    v = jsonschema.Draft202012Validator(schema)
    for line in r.stdout.splitlines():
        doc = json.loads(json.loads(line), object_pairs_hook=no_duplicates)
        assert v.is_valid(doc), (json.dumps(schema), line)
    return sum(got)


def test_random_wide_objects_agree_with_jsonschema():
    """Random objects of 17 to 40 keys (their sets in the walk): required
    keys, dependentRequired (chains among them), an anyOf of required keys,
    additionalProperties false, true or a schema; shuffled instances, keys
    missing, written twice, extra, bad values: `sieve match --key-order
    any` agrees with jsonschema on every one."""
    rng = random.Random(20261208)
    checked = accepted = 0
    for case in range(12):
        n = rng.randint(17, 40)
        names = [rng.choice(["a", "id", "n", "name", "x"]) + str(i) for i in range(n)]
        props = {k: dict(rng.choice(VALUE_TYPES)[0]) for k in names}
        schema = {"$schema": DRAFT, "type": "object", "properties": props,
                  "required": rng.sample(names, rng.randint(0, 4))}
        if rng.random() < 0.6:
            a, b, c = rng.sample(names, 3)
            schema["dependentRequired"] = {a: [b], b: [c]} if rng.random() < 0.5 else {a: [b, c]}
        if rng.random() < 0.4:
            schema["anyOf"] = [{"required": [k]} for k in rng.sample(names, 2)]
        schema["additionalProperties"] = rng.choice([False, True, {"type": "integer"}])
        st = stats(schema, "--key-order", "any")
        assert st["key_set_frames"] == 1 and st["key_order_narrowed"] == 0, (json.dumps(schema), st)
        good = {"integer": lambda r: r.randint(0, 9), "string": lambda r: "ab", "boolean": lambda r: True}
        texts = []
        for _ in range(60):
            inst = {}
            for k in names:
                if k in schema["required"] or rng.random() < 0.3:
                    t = props[k].get("type")
                    inst[k] = good[t](rng) if t else "red"
            if rng.random() < 0.2 and inst:
                del inst[rng.choice(list(inst))]
            if rng.random() < 0.15:
                inst["extra" + str(rng.randint(0, 9))] = rng.choice([1, "s"])
            if rng.random() < 0.1 and inst:
                inst[rng.choice(list(inst))] = [1]
            text = spell(inst, rng)
            if rng.random() < 0.1 and inst:
                k = rng.choice(list(inst))
                text = text[:-1] + (", " if len(inst) else "") + json.dumps(k) + ": " + json.dumps(inst[k]) + "}"
            texts.append(text)
        checked += len(texts)
        accepted += agrees_and_samples(schema, texts, case)
    assert 0.15 * checked < accepted < 0.9 * checked, (checked, accepted)


def test_wide_objects_with_key_conditions_agree_with_jsonschema():
    """Random objects of 17 to 30 keys with conditions that writing a key
    can break: `not` of required keys, oneOf and anyOf of required key sets,
    a oneOf of single required keys, beside dependentRequired (a table of
    the sets that may close, in the walk). Shuffled instances
    with keys missing, extra and written twice: `sieve match --key-order
    any` agrees with jsonschema on every one, and samples validate."""
    rng = random.Random(20261207)
    checked = accepted = 0
    for case in range(16):
        n = rng.randint(17, 30)
        names = ["k" + str(i) for i in range(n)]
        schema = {"$schema": DRAFT, "type": "object",
                  "properties": {k: {"type": "integer"} for k in names},
                  "required": rng.sample(names, rng.randint(0, 2)),
                  "additionalProperties": rng.choice([False, {"type": "integer"}])}
        cond = rng.sample(names, 6)
        kinds = rng.sample(["not", "oneOf", "anyOf", "oneOf1", "deps"], rng.randint(1, 3))
        if "oneOf" in kinds and "oneOf1" in kinds:
            kinds.remove("oneOf1")
        if "not" in kinds:
            schema["not"] = {"required": cond[:2]}
        if "oneOf" in kinds:
            schema["oneOf"] = [{"required": cond[2:4]}, {"required": [cond[4]]}]
        if "oneOf1" in kinds:  # a oneOf of single required keys
            schema["oneOf"] = [{"required": [k]} for k in cond[1:4]]
        if "anyOf" in kinds:
            schema["anyOf"] = [{"required": [cond[5], cond[0]]}, {"required": [cond[3]]}]
        if "deps" in kinds:
            schema["dependentRequired"] = {cond[4]: [cond[5]]}
        r = run("compile", schema, "--key-order", "any")
        if r.returncode == 2:  # the conditions leave no object
            continue
        st = json.loads(r.stdout)
        assert st["key_set_frames"] == 1 and st["key_order_narrowed"] == 0, (json.dumps(schema), st)
        texts = []
        for _ in range(80):
            inst = {k: rng.randint(0, 9) for k in names if k in schema["required"] or rng.random() < 0.15}
            for k in cond:
                if rng.random() < 0.5:
                    inst[k] = 1
            if rng.random() < 0.1:
                inst["extra" + str(rng.randint(0, 9))] = 1
            text = spell(inst, rng)
            if rng.random() < 0.1 and inst:
                k = rng.choice(list(inst))
                text = text[:-1] + ", " + json.dumps(k) + ": 1}"
            texts.append(text)
        checked += len(texts)
        accepted += agrees_and_samples(schema, texts, case)
    assert checked >= 400 and 0.05 * checked < accepted < 0.9 * checked, (checked, accepted)


def test_wide_object_with_a_count_keeps_schema_order_and_says_so():
    """min/maxProperties beside extra keys need a count the walk's set does
    not keep: such an object keeps the schema's order for its declared
    keys (extra keys may come anywhere) and says so (key_order_narrowed)."""
    keys = [f"field_{i:02d}" for i in range(20)]
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in keys}, "required": keys[:3],
              "additionalProperties": {"type": "string"}, "maxProperties": 22}
    st = stats(schema, "--key-order", "any")
    assert st["key_order_narrowed"] >= 1 and st["key_set_frames"] == 0
    rng = random.Random(3)
    texts = []
    for _ in range(300):
        inst = [(k, 1 if rng.random() < 0.97 else "s") for k in keys if k in keys[:3] or rng.random() < 0.4]
        for x in rng.sample(["zz", "extra", "a b"], rng.randint(0, 3)):
            inst.insert(rng.randint(0, len(inst)), (x, rng.choice(["s", "t", 2])))
        if rng.random() < 0.2:
            rng.shuffle(inst)
        texts.append("{" + ", ".join(json.dumps(k) + ": " + json.dumps(v) for k, v in inst) + "}")
    got = match(schema, texts, "--key-order", "any")
    for t, g in zip(texts, got):
        keys_in = [k for k in json.loads(t, object_pairs_hook=lambda p: [k for k, _ in p]) if k in keys]
        if g:
            assert oracle(schema, t), t
        elif oracle(schema, t):
            assert keys_in != sorted(keys_in), t  # only a declared key out of order is refused
    assert sum(got) > 50
    # the same object under its limit takes any order
    small = {"type": "object", "properties": {k: {"type": "integer"} for k in keys[:8]}, "additionalProperties": False}
    assert stats(small, "--key-order", "any")["key_order_narrowed"] == 0
    rev = "{" + ", ".join(f'"{k}": 1' for k in reversed(keys[:8])) + "}"
    assert match(small, [rev], "--key-order", "any") == [True]


def test_differences_stay_sound():
    rng = random.Random(7)
    base = {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}
    schemas = [
        {"type": "object", "properties": base, "oneOf": [{"required": ["a", "b"]}, {"required": ["b", "c"]}]},
        {"type": "object", "properties": base, "not": {"required": ["c"]}, "required": ["a", "b"]},
        {"type": "object", "properties": base, "if": {"required": ["a"]}, "then": {"required": ["c"]},
         "else": {"required": ["b"]}},
        {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                   {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
    ]
    for schema in schemas:
        texts = []
        for _ in range(200):
            vals = {"a": [1, 1, "s"], "b": ["s", "s", 1], "c": [True, True, 1], "d": [1]}
            inst = {k: rng.choice(vals[k]) for k in "abcd" if rng.random() < (0.3 if k == "d" else 0.7)}
            texts.append(spell(inst, rng))
        got = match(schema, texts, "--key-order", "any")
        for t, g in zip(texts, got):
            if g:
                assert oracle(schema, t), (schema, t)
        assert any(got), schema


def test_differences_take_any_order():
    """Objects in a language a difference sees (an overlapping oneOf, a
    `not` of an object schema, if/then/else, both sides of them) take key
    sets too, the universe's objects included: every order of a valid value
    is accepted and nothing invalid is, against jsonschema. An object there
    too big for its key sets makes the compile keep schema orders in every
    such language, and say so."""
    rng = random.Random(1207)
    base = {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}
    schemas = [
        # calculate_area (MaskBench Glaiveai2K): overlapping oneOf branches of one object
        {"type": "object", "properties": dict(base, d={"type": "integer"}),
         "oneOf": [{"properties": {"c": {"const": True}}, "required": ["a"]},
                   {"properties": {"c": {"const": False}}, "required": ["b"]}]},
        {"type": "object", "properties": base, "not": {"properties": {"a": {"minimum": 5}}, "required": ["a", "b"]}},
        {"type": "object", "properties": {"x": {"type": "object", "properties": base}},
         "if": {"properties": {"x": {"required": ["a", "c"]}}},
         "then": {"properties": {"x": {"properties": {"b": {"maxLength": 1}}}}}},
        {"allOf": [{"enum": [{"a": 1, "b": "s"}, {"b": "t", "c": True}]},
                   {"not": {"additionalProperties": {"type": "integer"}}}]},
        {"type": "array", "items": {"oneOf": [{"type": "object", "properties": base, "required": ["a"]},
                                               {"type": "object", "properties": base, "required": ["b", "c"]}]}},
    ]
    for schema in schemas:
        st = stats(schema, "--key-order", "any")
        assert "difference_key_sets" not in st["narrowed_by_budget"], (json.dumps(schema), st)
        texts = []
        for _ in range(150):
            vals = {"a": [1, 7, "s"], "b": ["s", "t", "uu", 1], "c": [True, False, 1], "d": [1]}
            inst = {k: rng.choice(vals[k]) for k in "abcd" if rng.random() < (0.3 if k == "d" else 0.7)}
            if "x" in schema.get("properties", {}):
                inst = {"x": inst}
            elif schema.get("type") == "array":
                inst = [inst, {k: v for k, v in reversed(list(inst.items()))}]
            texts.append(spell(inst, rng))
        got = match(schema, texts, "--key-order", "any")
        want = [oracle(schema, t) for t in texts]
        assert got == want, [(json.dumps(schema), t, g) for t, g, w in zip(texts, got, want) if g != w][:2]
        assert any(got), schema
    # 20 keys in an overlapping oneOf: schema orders in the differences, sound
    wide = {"type": "object", "properties": {"k%d" % i: {"type": "integer"} for i in range(20)},
            "oneOf": [{"required": ["k1"]}, {"required": ["k2"]}, {"properties": {"k3": {"minimum": 3}}}]}
    st = stats(wide, "--key-order", "any")
    assert "difference_key_sets" in st["narrowed_by_budget"], st
    texts = [spell({"k%d" % i: rng.randint(0, 5) for i in range(20) if rng.random() < 0.4}, rng) for _ in range(100)]
    for t, g in zip(texts, match(wide, texts, "--key-order", "any")):
        if g:
            assert oracle(wide, t), t


def test_differences_narrow_only_the_wide_location():
    """An object too big for key sets in a language a difference sees keeps
    the schema's orders at its own location (every language there, the
    universe's too); the other locations of the difference keep their key
    sets: a small object beside a 20-key one in an overlapping oneOf takes
    every order, and the compile agrees with jsonschema wherever the wide
    object's keys come in the schema's order (and never accepts an invalid
    value). Without it the whole compile kept schema orders in every such
    language."""
    rng = random.Random(1208)
    small = {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}
    wide = {"k%d" % i: {"type": "integer"} for i in range(20)}
    schema = {"type": "object", "properties": {"wide": {"type": "object", "properties": wide},
                                               "small": {"type": "object", "properties": small}},
              "oneOf": [{"required": ["wide"]}, {"required": ["small"]},
                        {"properties": {"small": {"properties": {"a": {"minimum": 3}}}}}]}
    st = stats(schema, "--key-order", "any")
    assert "difference_key_sets" in st["narrowed_by_budget"], st
    ordered, shuffled = [], []
    for _ in range(200):
        inst = {}
        if rng.random() < 0.4:
            inst["wide"] = {"k%d" % i: rng.randint(0, 5) for i in range(20) if rng.random() < 0.3}
        if rng.random() < 0.8:
            vals = {"a": [1, 7, "s"], "b": ["s", 1], "c": [True, 1]}
            inst["small"] = {k: rng.choice(v) for k, v in vals.items() if rng.random() < 0.7}
        text = spell({k: v for k, v in inst.items() if k != "wide"}, rng)
        if "wide" in inst:
            w = json.dumps(inst["wide"])  # the schema's order
            text = "{" + ", ".join(filter(None, ['"wide": ' + w, text[1:-1]])) + "}"
        ordered.append(text)
        shuffled.append(spell(inst, rng))
    got = match(schema, ordered, "--key-order", "any")
    want = [oracle(schema, t) for t in ordered]
    assert got == want, [(t, g) for t, g, w in zip(ordered, got, want) if g != w][:2]
    assert sum(got) > 20
    # a small object out of its schema order is accepted (with a narrowed compile it was not)
    assert any(g and '"small": {"c"' in t for t, g in zip(ordered, got))
    for t, g in zip(shuffled, match(schema, shuffled, "--key-order", "any")):
        if g:
            assert oracle(schema, t), t


def test_intersections_take_any_order():
    """allOf, a union beside type keywords and a $ref beside other keywords
    are intersections: a spelling both operands hold is a value valid in
    both, so their objects keep key sets, and sieve agrees with jsonschema
    on instances with shuffled keys (schema order refused most of them)."""
    rng = random.Random(11)
    shapes = {"circle": ["radius"], "rectangle": ["length", "width"], "triangle": ["base", "height"]}
    schemas = [
        # calculate_area as function-calling sets write it: a tagged oneOf beside "type": "object"
        {"type": "object", "properties": {"shape": {"enum": list(shapes)}, "radius": {"type": "number"},
                                          "length": {"type": "number"}, "width": {"type": "number"},
                                          "base": {"type": "number"}, "height": {"type": "number"}},
         "required": ["shape"],
         "oneOf": [{"properties": {"shape": {"const": k}, **{f: {"type": "number"} for f in v}},
                    "required": ["shape", *v]} for k, v in shapes.items()]},
        {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                    "required": ["a"]},
                   {"properties": {"c": {"type": "boolean"}, "b": {"minLength": 1}}, "required": ["c"]}]},
        {"$schema": "https://json-schema.org/draft/2020-12/schema",
         "$defs": {"base": {"type": "object", "properties": {"a": {"type": "integer"}, "c": {}}, "required": ["a"]}},
         "$ref": "#/$defs/base", "properties": {"b": {"type": "string"}}, "required": ["b"]},
    ]
    vals = {"shape": list(shapes) + [1], "radius": [1, "x"], "length": [2], "width": [3, None], "base": [4],
            "height": [5], "a": [1, 1, "s"], "b": ["s", "s", "", 1], "c": [True, True, 1], "d": [1]}
    for schema in schemas:
        keys = [k for k in vals if k in json.dumps(schema)] + ["d"]
        texts = set()
        for _ in range(250):
            inst = {k: rng.choice(vals[k]) for k in keys if rng.random() < (0.3 if k == "d" else 0.7)}
            texts.add(spell(inst, rng))
        texts = sorted(texts)
        got = match(schema, texts, "--key-order", "any")
        want = [oracle(schema, t) for t in texts]
        assert got == want, [(t, g) for t, g, w in zip(texts, got, want) if g != w][:5]
        assert sum(want) >= 10, schema
        # schema order refuses the valid ones out of order
        assert sum(match(schema, texts)) < sum(want)


def test_union_beside_properties_distributes_over_its_branches():
    """A union beside `properties` (JSON Schema Store's
    livelyPropertiesSchema: a setting's `type` and a free-form `value`,
    then a oneOf of closed kinds) is, with --key-order any, distributed
    like an allOf over the union: each kind merged with the properties is
    one plain object, whose keys take every order. As a product the
    kinds, over the location's keys with the free-form value, were too big
    for key sets, and the oneOf's difference fell back to the schema's
    orders for the whole compile. sieve agrees with jsonschema on shuffled
    instances, and the compile narrows nothing."""
    kinds = {"slider": {"value": {"type": "number"}, "text": {"type": "string"}, "max": {"type": "number"},
                        "min": {"type": "number"}, "step": {"type": "number"}},
             "textbox": {"value": {"type": "string"}, "text": {"type": "string"}},
             "dropdown": {"value": {"type": "integer"}, "text": {"type": "string"},
                          "items": {"type": "array", "items": {"type": "string"}}},
             "folder": {"value": {"type": "string"}, "text": {"type": "string"}, "filter": {"type": "string"},
                        "folder": {"type": "string"}}}
    required = {"slider": ["text", "max", "min", "step"], "textbox": ["text"], "dropdown": ["text", "items"],
                "folder": ["text", "filter", "folder"]}
    setting = {"type": "object", "properties": {"type": {"enum": list(kinds) + ["label"]}, "value": {}},
               "oneOf": [{"type": "object", "additionalProperties": False, "required": required[k],
                          "properties": {"type": {"const": k}, **kinds[k]}} for k in kinds]}
    schema = {"$schema": DRAFT, "type": "object", "additionalProperties": setting}
    st = stats(schema, "--key-order", "any")
    assert st["narrowed_by_budget"] == [] and st["key_order_narrowed"] == 0, st
    good = {"value": [1, "a", 2.5], "text": ["t"], "max": [9], "min": [0], "step": [1], "items": [["x"]],
            "filter": ["*"], "folder": ["f"]}
    rng = random.Random(7)
    texts = set()
    for _ in range(120):
        k = rng.choice(list(kinds))
        inst = {"type": k} if rng.random() < 0.8 else {}
        for m in kinds[k]:
            if m in required[k] or rng.random() < 0.5:
                inst[m] = rng.choice(good[m])
        r = rng.random()
        if r < 0.1:
            inst.pop(rng.choice(required[k]), None)
        elif r < 0.2:
            inst["other"] = 1
        elif r < 0.25:
            inst["type"] = "label"
        texts.add(spell({"s1": inst}, rng))
    texts = sorted(texts)
    got = match(schema, texts, "--key-order", "any")
    want = [oracle(schema, t) for t in texts]
    assert got == want, [(t, g) for t, g, w in zip(texts, got, want) if g != w][:5]
    assert sum(want) >= 40
    assert sum(match(schema, texts)) < sum(want)  # the schema's order refuses most


def test_distributed_wide_objects_keep_the_schema_order():
    """A wide object (18 keys, beyond key sets in a union) beside a oneOf
    of two partial kinds, as OpenStack's Designate zone
    (Github_medium---o55361) writes it: distributed under --key-order any,
    the merged objects keep their keys in order, and that order is the
    schema's, the kinds' members in their places among the schema's
    (the kinds' conjuncts first would put `masters` and `type` first and
    refuse the instances the product accepted)."""
    names = [f"k{i:02d}" for i in range(16)]
    props = {k: {"type": "string"} for k in names[:8]}
    props["masters"] = {"type": ["array", "null"], "items": {"type": "string"}}
    props.update({k: {"type": "string"} for k in names[8:]})
    props["type"] = {"enum": ["PRIMARY", "SECONDARY"]}
    schema = {"$schema": DRAFT, "type": "object", "additionalProperties": False, "properties": props,
              "oneOf": [{"properties": {"masters": {"type": ["null", "array"], "maxItems": 0},
                                        "type": {"enum": ["PRIMARY"]}}, "required": ["k03"]},
                        {"properties": {"masters": {"type": "array", "minItems": 1}, "type": {"enum": ["SECONDARY"]}},
                         "required": ["type", "masters"]}]}
    texts = []
    for kind, masters in (("PRIMARY", None), ("SECONDARY", ["a:53"]), ("SECONDARY", None), ("PRIMARY", ["b"])):
        inst = {k: "v" for k in names[:8]}
        inst["masters"] = masters
        inst.update({k: "v" for k in names[8:]})
        inst["type"] = kind
        texts.append(json.dumps(inst))
    want = [oracle(schema, t) for t in texts]
    assert want == [True, True, False, False]
    assert match(schema, texts, "--key-order", "any") == want
    assert match(schema, texts) == want


def test_orders_stay_out_of_products():
    """A positive operand with more key orders than the language a difference
    subtracts would let invalid values through: here the universe's free-form
    values hold an inner object with an extra key first, the subtracted
    language does not, and key sets or extra keys anywhere in the positive
    operand would meet it (78 of 300 samples were invalid). Languages that
    enter products keep schema order."""
    p = {"type": "object", "not": {"properties": {"k": {"not": {"type": "string", "pattern": "11"}}}}}
    q = {"type": "object", "properties": {"k": {"type": "string", "pattern": "22"}}}
    schema = {"type": "object", "$defs": {"p": p, "q": q}, "oneOf": [
        {"allOf": [{"patternProperties": {"x": {"$ref": "#/$defs/p"}}},
                   {"not": {"patternProperties": {"x": {"not": {"$ref": "#/$defs/q"}}}}}]},
        {"allOf": [{"patternProperties": {"y": {"$ref": "#/$defs/q"}}},
                   {"not": {"patternProperties": {"y": {"not": {"$ref": "#/$defs/p"}}}}}]}]}
    r = run("sample", schema, "--key-order", "any", "-n", "300", "--seed", "2")
    assert r.returncode == 0, r.stderr
    v = jsonschema.Draft202012Validator(schema)
    bad = [t for t in (json.loads(x) for x in r.stdout.splitlines()) if not v.is_valid(json.loads(t))]
    assert not bad, bad[:3]


def test_cli_rejects_a_bad_key_order():
    r = run("compile", {"type": "object"}, "--key-order", "sorted")
    assert r.returncode == 64 and "--key-order" in r.stderr


def test_const_and_enum_objects_take_any_order():
    """An object in a const or an enum is equal to its value in any key
    order (JSON objects are unordered): with --key-order any, each key once
    and every key present, at any depth; checked against jsonschema on
    random literals, their shuffles, a key written twice, a key missing and
    a value changed."""
    rng = random.Random(20261205)

    def literal(depth=0):
        n = rng.randint(2, 5 - depth)
        out = {}
        for k in rng.sample(["a", "b", "id", "kind", "size", "ok", "x"], n):
            r = rng.random()
            out[k] = literal(depth + 1) if depth < 1 and r < 0.3 else \
                rng.choice([1, 2.5, "s", True, None, [1, {"p": 1, "q": 2}]])
        return out

    checked = accepted = 0
    for case in range(25):
        lits = [literal() for _ in range(rng.randint(1, 3))]
        schema = {"$schema": DRAFT, **({"const": lits[0]} if len(lits) == 1 else {"enum": lits})}
        st = stats(schema, "--key-order", "any")
        assert st["key_order_narrowed"] == 0, (schema, st)
        texts = []
        for _ in range(12):
            texts.append(spell(rng.choice(lits), rng))
        v = dict(rng.choice(lits))
        k = rng.choice(list(v))
        body = spell(v, rng)[1:-1]
        texts.append("{" + body + ", " + json.dumps(k) + ": " + json.dumps(v[k]) + "}")  # written twice
        texts.append(spell({x: v[x] for x in v if x != k}, rng))                            # missing
        texts.append(spell({**v, k: "changed"}, rng))                                       # another value
        got = match(schema, texts, "--key-order", "any")
        for t, g in zip(texts, got):
            assert g == oracle(schema, t), (case, json.dumps(schema), t, g)
        checked += len(texts)
        accepted += sum(got)
    assert accepted >= 25 * 12 * 0.9 and accepted < checked, (checked, accepted)
    # the default keeps the literal's own order
    assert match({"const": {"b": 1, "a": 2}}, ['{"b": 1, "a": 2}', '{"a": 2, "b": 1}']) == [True, False]
    # the samples take several orders
    out = run("sample", {"const": {"a": 1, "b": 2, "c": 3}}, "--key-order", "any", "-n", "40", "--seed", "3")
    assert out.returncode == 0, out.stderr
    assert len(set(json.loads(l) for l in out.stdout.splitlines())) >= 3


def test_draft7_dependencies_keep_key_sets():
    """The array form of draft 7's `dependencies` ("a needs b") is a key
    condition objects take themselves, as dependentRequired is: it costs no
    product, so the object keeps its key sets and its free-form values as
    parts. (It used to turn both off: the object kept the schema's key order
    with --key-order any, Github_easy---o87817.)"""
    rng = random.Random(77)
    checked = 0
    for case in range(20):
        schema, make = random_object(rng)
        names = list(schema["properties"])
        a, b = rng.sample(names, 2)
        def draft7(s):  # dependentRequired is draft 2019's name for the array form
            for sub in s.get("properties", {}).values():
                draft7(sub)
            if "dependentRequired" in s:
                s["dependencies"] = s.pop("dependentRequired")
        draft7(schema)
        schema.setdefault("dependencies", {})[a] = [b]
        schema = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
        texts = [spell(make(rng, rng.random() < 0.6), rng) for _ in range(40)]
        v = jsonschema.Draft7Validator(schema)
        r = run("compile", schema, "--key-order", "any")
        st = json.loads(r.stdout)
        if r.returncode != 0:  # "a needs b" where b may not be written, beside a required a
            assert st["error"]["type"] == "empty", st
            assert not any(v.is_valid(json.loads(t)) for t in texts), json.dumps(schema)
            continue
        assert st["key_order_narrowed"] == 0 and st["narrowed_by_budget"] == [], (schema, st)
        got = match(schema, texts, "--key-order", "any")
        for t, g in zip(texts, got):
            try:
                want = v.is_valid(json.loads(t, object_pairs_hook=no_duplicates))
            except ValueError:
                want = False
            assert g == want, (case, json.dumps(schema), t, g)
        checked += len(texts)
    assert checked >= 600, checked
