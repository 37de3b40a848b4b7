"""oneOf branches that share no value (fsm/schema_disjoint.c), checked
against Python's jsonschema.

When the branches are proven disjoint from their text (different types,
a required tag with a different const in each branch, closed objects told
apart by a required key), oneOf compiles as a union, with parts: recursion
and free-form values go to any depth inside it. When they are not proven
(a tag that is not required, open objects), the exact difference stays, and
a value valid in two branches is refused.

- Random tagged unions, type unions and closed-object unions: `sieve match
  --key-order any` agrees with jsonschema on every instance, including
  instances that mix two branches and instances with a wrong or missing tag.
- Random unions the proof cannot take: every accepted instance is valid,
  and instances valid in two branches are refused.
- A recursive tagged union (a tree) is accepted 50 levels deep and refused
  when broken at any level; free-form values nest 40 levels deep in a
  branch. Before the proof both were cut at a fixed depth.
"""
import json
import random

from suite import compile_stats as stats, nested, oracle, sieve as run, sieve_match as match

DRAFT = "https://json-schema.org/draft/2020-12/schema"


FIELDS = [
    ("id", {"type": "integer", "minimum": 0}, [0, 7, 12], [-1, "7", None]),
    ("name", {"type": "string", "maxLength": 4}, ["", "ab", "abcd"], ["toolong", 3]),
    ("ok", {"type": "boolean"}, [True, False], ["true", 1]),
    ("size", {"enum": ["s", "m", "l"]}, ["s", "l"], ["xl", None]),
    ("where", {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"],
               "additionalProperties": False}, [{"x": 1}], [{"y": 1}, {"x": "1"}]),
]


def tagged_branch(rng, tag_key, tag, closed, tag_required=True):
    fields = rng.sample(FIELDS, rng.randint(1, 3))
    props = {tag_key: {"const": tag}}
    for name, s, _, _ in fields:
        props[name] = s
    req = ([tag_key] if tag_required else []) + [f[0] for f in fields if rng.random() < 0.5]
    schema = {"type": "object", "properties": props, "required": req}
    if closed:
        schema["additionalProperties"] = False
    return schema, fields


def instances(rng, tag_key, tags, branches, n, shuffle):
    """Objects built from the branches' fields, with right, wrong or no tags,
    fields of other branches, and bad values. Unshuffled, the keys of the
    branch the tag names come in its order and other keys after them (the
    order sieve's default writes); shuffled, in any order."""
    pool = {f[0]: f for _, fields in branches for f in fields}
    out = []
    for _ in range(n):
        _, fields = rng.choice(branches)
        inst = {}
        r = rng.random()
        if r < 0.75:
            inst[tag_key] = rng.choice(tags)
        elif r < 0.85:
            inst[tag_key] = "other"
        for name, _, good, bad in fields:
            if rng.random() < 0.8:
                inst[name] = rng.choice(good if rng.random() < 0.85 else bad)
        if rng.random() < 0.25:  # a field of another branch
            name, _, good, _ = rng.choice(list(pool.values()))
            inst[name] = rng.choice(good)
        if rng.random() < 0.1:
            inst["extra"] = 1
        keys = list(inst)
        if shuffle:
            rng.shuffle(keys)
        else:
            named = [b for b, _ in branches if b["properties"][tag_key]["const"] == inst.get(tag_key)]
            order = list(named[0]["properties"]) if named else []
            keys.sort(key=lambda k: order.index(k) if k in order else len(order))
        out.append("{" + ", ".join(json.dumps(k) + ": " + json.dumps(inst[k]) for k in keys) + "}")
    return out


def test_tagged_unions_agree_with_jsonschema():
    rng = random.Random(20261202)
    checked = accepted = 0
    for case in range(30):
        tag_key = rng.choice(["type", "kind", "op"])
        tags = rng.sample(["get", "put", "scan", "query", "delete"], rng.randint(2, 4))
        closed = rng.random() < 0.5
        branches = [tagged_branch(rng, tag_key, t, closed) for t in tags]
        schema = {"$schema": DRAFT, "oneOf": [b for b, _ in branches]}
        if rng.random() < 0.3:  # branches behind $refs, as Pydantic writes them
            schema = {"$schema": DRAFT, "$defs": {f"B{i}": b for i, (b, _) in enumerate(branches)},
                      "oneOf": [{"$ref": f"#/$defs/B{i}"} for i in range(len(branches))]}
        st = stats(schema)
        assert st["narrowed_by_budget"] == [] and not st["recursion_truncated"], (case, st)
        texts = instances(rng, tag_key, tags, branches, 60, shuffle=False)
        got = match(schema, texts)
        for t, g in zip(texts, got):
            assert g == oracle(schema, t), (case, json.dumps(schema), t, g)
        checked += len(texts)
        accepted += sum(got)
        # keys in any order: exact for closed objects; open ones keep their
        # difference and its key order (schema_disjoint.c), so only sound
        texts = instances(rng, tag_key, tags, branches, 60, shuffle=True)
        got = match(schema, texts, "--key-order", "any")
        for t, g in zip(texts, got):
            if closed:
                assert g == oracle(schema, t), (case, json.dumps(schema), t, g)
            elif g:
                assert oracle(schema, t), (case, json.dumps(schema), t)
        checked += len(texts)
        accepted += sum(got)
    assert checked == 3600 and 0.1 * checked < accepted < 0.8 * checked, accepted


def test_type_unions_agree_with_jsonschema():
    rng = random.Random(7)
    branches = [
        {"type": "string", "maxLength": 3},
        {"type": "integer", "minimum": 0},
        {"type": "null"},
        {"type": "array", "items": {"type": "boolean"}, "maxItems": 2},
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False},
        {"enum": [1.5, "long string", True]},
    ]
    values = ["", "abc", "abcd", 0, 5, -3, 1.5, 2.5, None, [], [True], [True, False, True], [1],
              {"a": 1}, {"a": 1, "b": 2}, {}, "long string", True, False]
    for k in range(2, len(branches) + 1):
        for _ in range(6):
            pick = rng.sample(branches, k)
            # integer and 1.5 share no value; "long string" is no string of length <= 3
            schema = {"$schema": DRAFT, "oneOf": pick}
            texts = [json.dumps(v) for v in values]
            got = match(schema, texts, "--key-order", "any")
            assert got == [oracle(schema, t) for t in texts], (json.dumps(schema), list(zip(texts, got)))


def test_closed_objects_told_apart_by_a_required_key():
    schema = {"$schema": DRAFT, "type": "array", "items": {"oneOf": [
        {"type": "object", "properties": {"node_id": {"type": "string"}}, "required": ["node_id"],
         "additionalProperties": False},
        {"type": "object", "properties": {"item_id": {"type": "integer"}}, "required": ["item_id"],
         "additionalProperties": False},
        {"type": "object", "properties": {"owner": {"type": "string"}, "repo": {"type": "string"},
                                          "number": {"type": "integer"}},
         "required": ["owner", "repo", "number"], "additionalProperties": False}]}}
    texts = ['[{"node_id": "x"}]', '[{"item_id": 3}, {"owner": "a", "repo": "b", "number": 1}]',
             '[{"node_id": "x", "item_id": 3}]', '[{"owner": "a", "repo": "b"}]', '[{"item_id": "3"}]', "[]",
             '[{"number": 1, "repo": "b", "owner": "a"}]']
    assert match(schema, texts, "--key-order", "any") == [oracle(schema, t) for t in texts]
    assert match(schema, texts, "--key-order", "any") == [True, True, False, False, False, True, True]


def test_dense_overlaps_agree_with_jsonschema():
    """Branches that nearly all share a value: objects told apart by a tag
    no branch requires, with no type, so every non-object and every object
    without the tag is in all of them. Each branch then subtracts the
    others it still meets after its first difference (schema.c), and the
    branches' parts join in pairs; the values valid in exactly one branch
    are what is left, in schema order and in any order."""
    rng = random.Random(20261207)
    accepted = 0
    for case in range(8):
        n = [4, 6, 7, 8, 9, 10, 12, 5][case]  # stacks of unions of every shape up to 12
        tags = [f"t{i}" for i in range(n)]
        branches = []
        for i, t in enumerate(tags):
            kinds = [t] + ([tags[(i + 1) % n]] if rng.random() < 0.3 else [])  # some tags in two branches
            props = {"kind": {"enum": kinds}, "note": {"type": "string", "maxLength": 3}}
            if rng.random() < 0.3:
                props["size"] = {"type": "integer", "minimum": i}
            branches.append({"properties": props})
        schema = {"$schema": DRAFT, "oneOf": branches}
        texts = ["1", '"s"', "null", "[]", "{}", '{"note": "ab"}', '{"kind": "zz"}']
        for _ in range(40):
            inst = {"kind": rng.choice(tags + ["zz"])}
            if rng.random() < 0.6:
                inst["note"] = rng.choice(["", "abc", "abcd", 5])
            if rng.random() < 0.4:
                inst["size"] = rng.randint(-1, n)
            if rng.random() < 0.2:
                inst["extra"] = True
            keys = list(inst)
            texts.append("{" + ", ".join(json.dumps(k) + ": " + json.dumps(inst[k]) for k in keys) + "}")
        got = match(schema, texts)
        for t, g in zip(texts, got):
            assert g == oracle(schema, t), (case, json.dumps(schema), t, g)
        accepted += sum(got)
        shuffled = []
        for t in texts[7:]:
            items = list(json.loads(t).items())
            rng.shuffle(items)
            shuffled.append("{" + ", ".join(json.dumps(k) + ": " + json.dumps(v) for k, v in items) + "}")
        got = match(schema, shuffled, "--key-order", "any")
        for t, g in zip(shuffled, got):
            assert g == oracle(schema, t), (case, json.dumps(schema), t, g)
        accepted += sum(got)
    assert accepted > 100, accepted


def test_unproven_overlap_stays_exact():
    """A tag that no branch requires (Pydantic's discriminator with a
    default): an object without the tag may be valid in several branches,
    and then oneOf refuses it."""
    rng = random.Random(11)
    for case in range(12):
        tags = rng.sample(["get", "put", "scan", "query"], 3)
        closed = rng.random() < 0.5
        branches = [tagged_branch(rng, "op", t, closed, tag_required=False) for t in tags]
        schema = {"$schema": DRAFT, "oneOf": [b for b, _ in branches]}
        texts = instances(rng, "op", tags, branches, 50, shuffle=False)
        # with no tag and only the shared field: in every branch that allows it
        texts.append("{}")
        got = match(schema, texts)
        for t, g in zip(texts, got):
            if g:
                assert oracle(schema, t), (case, json.dumps(schema), t)
        assert not got[-1] or oracle(schema, "{}"), json.dumps(schema)
    # the plain case: two open objects, a value in both is refused
    schema = {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                        {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}]}
    assert match(schema, ['{"a": 1}', '{"b": 1}', '{"a": 1, "b": 2}']) == [True, True, False]



def overlapping_objects(k, m):
    """k open objects over the same m keys, each with its own value per key
    and one key of its own required: an object may be valid in several."""
    kinds = [lambda b: {"type": "string", "maxLength": 8 + b}, lambda b: {"type": "integer", "minimum": b},
             lambda b: {"type": "array", "items": {"type": "string"}, "maxItems": 3 + b},
             lambda b: {"enum": ["v%d" % b, "x"]}]
    return {"oneOf": [{"type": "object", "required": ["p%d" % b],
                       "properties": {"p%d" % i: kinds[(b + i) % 4](b) for i in range(m)}} for b in range(k)]}


def test_an_overlapping_union_frees_what_its_difference_is_done_with():
    """The exact oneOf is a chain of products per branch (in the union,
    minus each other branch) and a chain of unions; each step's input dies
    with the step. Held to the end of the compile, 8 open objects of 14 keys
    took 81 MB of the compile's account and were refused under 58 MB; freed
    as the chains go on, they peak at 51 MB. The automaton is the exact one:
    a value valid in two branches is refused."""
    schema = overlapping_objects(8, 14)
    st = stats(schema, "--max-memory", "58000000")
    assert st["memory_peak_bytes"] < 58000000, st
    rng = random.Random(5)
    # in one branch; in two (p0 and p4 are strings in both 0 and 4); in none
    texts = ['{"p0": "ab"}', '{"p0": "ab", "p1": 1}', '{"p0": "a", "p4": "x"}', '{"p1": 3}', '{}']
    for _ in range(60):
        obj = {}
        for i in rng.sample(range(14), rng.randint(1, 4)):
            obj["p%d" % i] = rng.choice(["a", "abcdefghijkl", 0, 5, 9, [], ["s"] * 5, "v3", "x", None])
        texts.append(json.dumps({k: obj[k] for k in sorted(obj, key=lambda k: int(k[1:]))}))
    got = match(schema, texts)
    for t, g in zip(texts, got):
        assert g == oracle(schema, t), (t, g)
    assert got[:5] == [True, True, False, False, False], got[:5]


POOL = [("k0", {"type": "integer"}, [0, 5], ["5", None]),
        ("k1", {"type": "string", "maxLength": 3}, ["", "abc"], ["abcd", 1]),
        ("k2", {"type": "boolean"}, [True], [0]),
        ("k3", {}, [None, {"x": [1, {}]}, "s"], []),
        ("k4", {"enum": ["a", "b"]}, ["a"], ["c"]),
        ("k5", {"type": "array", "items": {"type": "integer"}}, [[], [1, 2]], [["1"]])]


def closed_overlapping(rng):
    """Closed objects over one pool of members (a member has one schema
    wherever it appears), random members and required keys each: branches
    that may share values. None where one branch holds every value of
    another (that oneOf keeps its difference, and the shared key order of
    one)."""
    shapes = []
    for b in range(rng.randint(2, 4)):
        keys = sorted(rng.sample(range(len(POOL)), rng.randint(1, 4)))
        shapes.append((keys, [i for i in keys if rng.random() < 0.4]))
    for a, (ki, ri) in enumerate(shapes):
        for b, (kj, rj) in enumerate(shapes):
            if a != b and set(ki) <= set(kj) and set(rj) <= set(ri):
                return None
    defs, branches = {}, []
    for b, (keys, req) in enumerate(shapes):
        br = {"type": "object", "additionalProperties": False,
              "properties": {POOL[i][0]: POOL[i][1] for i in keys}}
        req = [POOL[i][0] for i in req]
        if req:
            br["required"] = req
        if rng.random() < 0.3:
            defs["B%d" % b] = br
            br = {"$ref": "#/$defs/B%d" % b}
        branches.append(br)
    schema = {"$schema": DRAFT, "oneOf": branches}
    if defs:
        schema["$defs"] = defs
    return schema


def pool_instance(rng, shuffle=False):
    keys = [i for i in range(len(POOL)) if rng.random() < 0.4]
    if rng.random() < 0.1:
        keys.append(None)  # a key no branch names
    if shuffle:
        rng.shuffle(keys)
    parts = []
    for i in keys:
        if i is None:
            parts.append('"zz": 1')
            continue
        name, _, good, bad = POOL[i]
        v = rng.choice(bad) if bad and rng.random() < 0.15 else rng.choice(good)
        parts.append(json.dumps(name) + ": " + json.dumps(v))
    return "{" + ", ".join(parts) + "}"


def test_overlapping_closed_objects_agree_with_jsonschema():
    """Closed objects whose shared members are the same schema: an object is
    in a branch when its keys are among the branch's members and hold its
    required ones, so "in exactly one" is a condition on keys per branch
    (schema_disjoint.c sv_sc_closed_oneof), and the union needs no
    difference. Random unions and instances (keys of the pool in any subset,
    a foreign key, wrong values), in schema order and with keys shuffled
    under --key-order any, agree with jsonschema; a free-form member holds a
    value 50 levels deep, which the difference, spelling values out to a
    bounded depth, refused."""
    rng = random.Random(23)
    cases = deep_checked = 0
    for case in range(60):
        schema = closed_overlapping(rng)
        if schema is None:
            continue
        r = run("compile", schema)
        if r.returncode != 0:  # no value in exactly one branch
            assert json.loads(r.stdout)["error"]["type"] == "empty", (json.dumps(schema), r.stdout)
            continue
        cases += 1
        texts = [pool_instance(rng) for _ in range(60)] + ["{}", "[]", "1"]
        got = match(schema, texts)
        for t, g in zip(texts, got):
            assert g == oracle(schema, t), (case, json.dumps(schema), t, g)
        shuffled = [pool_instance(rng, shuffle=True) for _ in range(30)]
        got = match(schema, shuffled, "--key-order", "any")
        for t, g in zip(shuffled, got):
            assert g == oracle(schema, t), (case, "any order", json.dumps(schema), t, g)
        deep = json.dumps({"k3": nested(50)})
        if oracle(schema, deep):
            assert match(schema, [deep]) == [True], (case, json.dumps(schema))
            deep_checked += 1
    assert cases >= 20 and deep_checked >= 3, (cases, deep_checked)


TREE = {"$schema": DRAFT, "$defs": {"node": {"oneOf": [
    {"type": "object", "properties": {"kind": {"const": "leaf"}, "value": {"type": "integer"}},
     "required": ["kind", "value"], "additionalProperties": False},
    {"type": "object", "properties": {"kind": {"const": "node"},
                                      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
     "required": ["kind", "children"], "additionalProperties": False}]}},
    "$ref": "#/$defs/node"}


def chain(depth, broken_at=None):
    v = {"kind": "leaf", "value": 1}
    for d in range(depth, 0, -1):
        v = {"kind": "node", "children": [v, {"kind": "leaf", "value": d}]}
        if d == broken_at:
            v["kind"] = "leaf"  # a leaf with children: in no branch
    return json.dumps(v)


def test_recursive_tagged_union_to_any_depth():
    st = stats(TREE)
    assert not st["recursion_truncated"], st
    texts = [chain(d) for d in (0, 1, 5, 20, 50)] + [chain(50, broken_at=b) for b in (1, 2, 17, 49, 50)]
    got = match(TREE, texts)
    assert got == [oracle(TREE, t) for t in texts] == [True] * 5 + [False] * 5


def test_free_form_values_nest_deep_inside_a_branch():
    schema = {"$schema": DRAFT, "oneOf": [
        {"type": "object", "properties": {"kind": {"const": "raw"}, "data": {}}, "required": ["kind", "data"]},
        {"type": "string"}]}
    deep = 1
    for i in range(40):
        deep = [deep] if i % 2 else {"k": deep}
    texts = [json.dumps({"kind": "raw", "data": deep}), json.dumps("s"),
             json.dumps({"kind": "raw", "data": deep})[:-2] + "}"]
    assert match(schema, texts) == [True, True, False]


def test_errors_inside_a_proven_union_keep_their_pointer():
    schema = {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"a": {"type": "strin"}}}]}
    r = run("compile", schema)
    assert r.returncode != 0
    err = json.loads(r.stdout)["error"]
    assert err["pointer"] == "/oneOf/1/properties/a/type" and err["keyword"] == "type", err


def test_near_misses_are_not_taken_for_disjoint():
    """Branches that look apart but share a value: the value is refused."""
    cases = [
        ({"oneOf": [{"const": 1}, {"const": 1.0}, {"const": 2}]}, ["1", "1.0", "2"]),
        ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, ["1", "1.5", "1.0"]),
        ({"oneOf": [{"enum": [2.0, "a"]}, {"type": "integer"}]}, ["2", "2.0", "3", '"a"']),
        ({"oneOf": [{"type": "object", "required": ["a"]},
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}]},
         ['{"a": "x"}', '{"a": 1}']),
        ({"oneOf": [{"type": "object", "properties": {"t": {"const": "x"}}},
                    {"type": "object", "properties": {"t": {"const": "y"}}}]},
         ['{"t": "x"}', "{}"]),
        ({"oneOf": [{"type": ["string", "null"]}, {"type": "null", "nullable": True}, {"type": "boolean"}]},
         ["null", '"s"', "true"]),
        ({"oneOf": [{"const": {"a": [1, 2]}}, {"const": {"a": [1, 2.0]}}, {"const": [1]}]},
         ['{"a": [1, 2]}', "[1]"]),
    ]
    for schema, texts in cases:
        assert match(schema, texts) == [oracle(schema, t) for t in texts], (schema, texts)


import pytest


@pytest.mark.parametrize("kw", ["anyOf", "oneOf"])
def test_required_key_groups_agree_with_jsonschema(kw):
    """anyOf of single required keys ("at least one of these") and oneOf
    ("exactly one", with type object) are conditions on the object's keys
    (schema_container.c), not products: they agree with jsonschema in both
    key orders, nest inside arrays, and keep the object's free-form values as
    parts. A key named by two oneOf branches meets both."""
    rng = random.Random(5 if kw == "anyOf" else 6)
    names = ["a", "b", "c", "d", "e", "f"]
    checked = accepted = 0
    for case in range(25):
        keys = rng.sample(names, rng.randint(2, 6))
        props = {k: rng.choice([{"type": "integer"}, {"type": "string", "maxLength": 3}, {}]) for k in keys}
        group = rng.sample(keys + ["zz"], rng.randint(1, min(4, len(keys))))
        if kw == "oneOf" and rng.random() < 0.2:
            group.append(group[0])
        schema = {"$schema": DRAFT, "type": "object", "properties": props,
                  kw: [{"required": [k], "title": "one"} for k in group]}
        if rng.random() < 0.5:
            schema["additionalProperties"] = False
        if rng.random() < 0.3:
            schema["required"] = [rng.choice(keys)]
        if rng.random() < 0.3:
            schema = {"$schema": DRAFT, "type": "array", "items": {k: v for k, v in schema.items() if k != "$schema"}}
        r = run("compile", schema)
        out = json.loads(r.stdout)
        empty = r.returncode != 0 and out["error"]["type"] == "empty"  # say, oneOf naming one key twice
        assert r.returncode == 0 or empty, r.stdout
        assert empty or out["narrowed_by_budget"] == [], (case, out)
        for order in ("schema", "any"):
            texts = []
            for _ in range(40):
                inst = {k: rng.choice([1, "ab", "long", None]) for k in keys if rng.random() < 0.45}
                if rng.random() < 0.15:
                    inst["zz"] = 1
                ks = list(inst) if order == "any" else [k for k in keys if k in inst] + (["zz"] if "zz" in inst else [])
                if order == "any":
                    rng.shuffle(ks)
                obj = "{" + ", ".join(json.dumps(k) + ": " + json.dumps(inst[k]) for k in ks) + "}"
                texts.append("[" + obj + "]" if schema["type"] == "array" else obj)
            got = [False] * len(texts) if empty else match(schema, texts, "--key-order", order)
            for t, g in zip(texts, got):
                if order == "any" and schema.get("additionalProperties", True) is not False and \
                        schema.get("items", {}).get("additionalProperties", True) is not False:
                    if g:
                        assert oracle(schema, t), (case, json.dumps(schema), t)
                    continue
                assert g == oracle(schema, t), (case, order, json.dumps(schema), t, g)
            checked += len(texts)
            accepted += sum(got)
    low = 0.1 if kw == "anyOf" else 0.03  # exactly one of a few keys present is rarer
    assert checked == 2000 and low * checked < accepted < 0.9 * checked, accepted


def test_branches_apart_through_their_own_unions_and_a_catch_all_tag():
    """Two more proofs: a branch that is itself an anyOf or oneOf is apart
    from another when every one of its branches is (a value given as a
    string or a closed object, beside an array of them), and a tag whose
    literal the other branch's `not` of literals refuses is apart from it
    (the catch-all branch of a tagged union: {"not": {"enum": [...]}}).
    Proven, the oneOf is a union with parts: the recursive list below is
    accepted 50 deep. Near misses stay differences and refuse the shared
    value."""
    env = {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"secure": {"type": "string"}},
                                          "additionalProperties": False}]}
    deploy = [{"type": "object", "properties": {"provider": {"enum": [p]}, "x": {"type": "integer"}},
               "required": ["provider"]} for p in ("script", "npm", 3)]
    deploy.append({"type": "object", "properties": {"provider": {"not": {"enum": ["script", "npm", 3.0]}},
                                                    "rest": {"$ref": "#"}}, "required": ["provider"]})
    schema = {"$schema": DRAFT, "type": "object",
              "properties": {"env": {"oneOf": [env, {"type": "array", "items": env}]},
                             "deploy": {"oneOf": deploy}}}
    st = stats(schema)
    assert not st["recursion_truncated"], st
    chain = {"provider": "last"}
    for i in range(50):
        chain = {"provider": "s%d" % i, "rest": {"deploy": chain}}
    values = [{"env": "A=1"}, {"env": {"secure": "x"}}, {"env": ["A=1", {"secure": "y"}]}, {"env": {"k": 1}},
              {"env": [{}]}, {"env": {}}, {"env": 5}, {"deploy": {"provider": "npm", "x": 1}},
              {"deploy": {"provider": 3, "x": "s"}}, {"deploy": {"provider": 3.0}}, {"deploy": {"provider": "other"}},
              {"deploy": {"provider": "script", "x": 2}}, {"deploy": {"x": 2}}, {"deploy": chain}]
    texts = [json.dumps(v) for v in values]
    assert match(schema, texts) == [oracle(schema, t) for t in texts]
    near = [
        # {} is valid in the closed object of env and in the second branch
        ({"oneOf": [env, {"type": "object", "properties": {"g": {}}, "additionalProperties": False}]},
         ["{}", '{"g": 1}', '"s"', '{"secure": "x"}']),
        # the `not` also holds other keywords: "b" is refused by neither
        ({"oneOf": [{"properties": {"t": {"const": "a"}}, "required": ["t"]},
                    {"properties": {"t": {"not": {"enum": ["a"], "type": "string"}}}, "required": ["t"]}]},
         ['{"t": "a"}', '{"t": "b"}', '{"t": 1}']),
        # a `not` of enum and const together refuses only what both name
        ({"oneOf": [{"properties": {"t": {"const": "a"}}, "required": ["t"]},
                    {"properties": {"t": {"not": {"enum": ["b"], "const": "a"}}}, "required": ["t"]}]},
         ['{"t": "a"}', '{"t": "b"}']),
        # integers past 2**53 are not taken for equal
        ({"oneOf": [{"const": 9007199254740993}, {"not": {"enum": [9007199254740992]}}]},
         ["9007199254740993", "9007199254740992", "1"]),
    ]
    for s, ts in near:
        assert match(s, ts) == [oracle(s, t) for t in ts], (s, ts)
