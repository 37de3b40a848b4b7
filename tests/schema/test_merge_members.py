"""Schemas met at one member merge into one schema instead of a product
(fsm/schema.c merge_arrays, merge_conjuncts, sv_sc_meet), checked against
Python's jsonschema.

- A key named by `properties` and by a matching `patternProperties` entry
  (or by several entries) must satisfy each of their schemas. Where those
  are arrays (type, items, minItems, maxItems), the member is one array
  whose items meet every items schema; where they are objects, one object.
  Before, it was a product of their languages, which calls into parts
  cannot enter: the compile was redone flat and recursive `$ref` targets
  were inlined until a state budget refused the schema (MaskBench's
  Washington Post schemas).
- The object merge also takes `additionalProperties` false (and true, {}):
  the merged object admits the keys every closed conjunct names.
- An untyped schema whose object form is empty (a required key closed out)
  still accepts every other type.
"""
import json
import random

import jsonschema

from suite import assert_agrees, compile_stats as stats, oracle, sieve, sieve_match as match

DRAFT = "https://json-schema.org/draft/2020-12/schema"

ITEMS = [{"type": "integer"}, {"minimum": 2}, {"type": "string", "maxLength": 2}, {"enum": [1, 2, "a", None]},
         {"type": ["integer", "string"]}, {}]


def random_array(rng):
    a = {}
    if rng.random() < 0.6:
        a["type"] = "array"
    if rng.random() < 0.8:
        a["items"] = rng.choice(ITEMS)
    if rng.random() < 0.4:
        a["minItems"] = rng.randint(0, 2)
    if rng.random() < 0.4:
        a["maxItems"] = rng.randint(1, 3)
    if rng.random() < 0.2:
        a["description"] = "an annotation"
    return a


def match_or_empty(schema, texts, *args):
    """sieve match's answers; a schema sieve finds unsatisfiable (exit 2,
    type "empty") accepts none of them."""
    r = sieve("match", schema, *args, stdin="".join(json.dumps(t) + "\n" for t in texts))
    if r.returncode == 2:
        assert json.loads(r.stdout)["error"]["type"] == "empty", r.stdout
        return [False] * len(texts)
    assert r.returncode == 0, r.stdout + r.stderr
    return [g == "1" for g in r.stdout.split()]


def random_array_texts(rng, n):
    pool = [1, 2, 3, "a", "bcd", None, 2.5, True]
    out = ["1", '"x"', "null", "{}"]
    for _ in range(n):
        out.append(json.dumps([rng.choice(pool) for _ in range(rng.randint(0, 4))]))
    return out


def test_arrays_met_at_a_member_agree_with_jsonschema():
    rng = random.Random(20261205)
    checked = accepted = 0
    for case in range(30):
        prop, pat = random_array(rng), random_array(rng)
        # "list" is named by properties and matched by both patterns
        schema = {"$schema": DRAFT, "type": "object", "properties": {"list": prop},
                  "patternProperties": {"^l": pat, "t$": random_array(rng)}}
        if case % 3 == 0:  # a $ref to one of them, the shape generators write
            schema["$defs"] = {"P": prop}
            schema["properties"]["list"] = {"$ref": "#/$defs/P"}
        texts = ['{"list": %s}' % t for t in random_array_texts(rng, 24)]
        got = match_or_empty(schema, texts)
        for t, g in zip(texts, got):
            assert g == oracle(schema, t), (case, json.dumps(schema), t, g)
        checked += len(texts)
        accepted += sum(got)
        # allOf of arrays: the same merge
        conj = {"$schema": DRAFT, "allOf": [prop, pat, random_array(rng)]}
        texts = random_array_texts(rng, 16)
        got = match_or_empty(conj, texts)
        for t, g in zip(texts, got):
            assert g == oracle(conj, t), (case, json.dumps(conj), t, g)
    assert 0.05 * checked < accepted < 0.9 * checked, (accepted, checked)


def test_closed_objects_merge_to_the_keys_every_closed_one_names():
    rng = random.Random(7)
    vals = {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {}, "d": {"enum": [1, "x"]}}
    checked = accepted = 0
    for case in range(30):
        conjs = []
        for _ in range(rng.randint(2, 3)):
            keys = rng.sample(sorted(vals), rng.randint(1, 4))
            o = {"properties": {k: vals[k] for k in keys}}
            if rng.random() < 0.5:
                o["type"] = "object"
            r = rng.random()
            if r < 0.45:
                o["additionalProperties"] = False
            elif r < 0.6:
                o["additionalProperties"] = rng.choice([True, {}])
            req = [k for k in keys if rng.random() < 0.3]
            if req:
                o["required"] = req
            conjs.append(o)
        schema = {"$schema": DRAFT, "allOf": conjs}
        texts = ["1", '"s"', "null", "[]", "{}"]
        for _ in range(24):
            inst = {}
            good = {"a": 1, "b": "x", "c": [1, {"z": None}], "d": "x", "e": 1}
            for k in sorted(good):
                if rng.random() < 0.35:
                    inst[k] = good[k] if rng.random() < 0.85 else rng.choice([1, "x", None])
            keys = list(inst)
            rng.shuffle(keys)
            texts.append("{" + ", ".join(json.dumps(k) + ": " + json.dumps(inst[k]) for k in keys) + "}")
        got = match_or_empty(schema, texts, "--key-order", "any")
        for t, g in zip(texts, got):
            assert g == oracle(schema, t), (case, json.dumps(schema), t, g)
        checked += len(texts)
        accepted += sum(got)
    assert 0.05 * checked < accepted < 0.9 * checked, (accepted, checked)


def test_an_empty_object_form_leaves_the_other_types():
    schema = {"properties": {"b": {}}, "additionalProperties": False, "required": ["a"]}
    assert_agrees(schema, ["1", '"x"', "[]", "null", "true", "{}", '{"a": 1}', '{"b": 1}'])
    assert sieve("compile", {"type": "object", **schema}).returncode == 2  # objects only: nothing left


def credits_schema():
    """The Washington Post shape: an object's `by` list named by properties
    and matched by a patternProperties entry that takes every key, both
    lists of a union of an author (whose image has credits again: recursion)
    and a reference; the catch-all's `redirect` beside a list of another
    union. The two unions differ, so `by` meets them over every pair of
    branches. (Washington Post's content object is open; open, it would
    overlap the author in the catch-all's own union, where their members
    call different parts after the same bytes: a conflict of its own,
    before this change as after.)"""
    return {
        "$schema": DRAFT,
        "$defs": {
            "credits": {"type": "object",
                        "properties": {"by": {"type": "array", "title": "By",
                                              "items": {"type": "object",
                                                        "anyOf": [{"$ref": "#/$defs/author"},
                                                                  {"$ref": "#/$defs/reference"}]}},
                                       "redirect": {"type": "array", "maxItems": 1,
                                                    "items": {"$ref": "#/$defs/redirect"}}},
                        "patternProperties": {"^[a-z_]*": {"type": "array",
                                                           "items": {"type": "object",
                                                                     "anyOf": [{"$ref": "#/$defs/author"},
                                                                               {"$ref": "#/$defs/reference"},
                                                                               {"$ref": "#/$defs/content"}]}}}},
            "author": {"type": "object", "additionalProperties": False,
                       "properties": {"type": {"enum": ["author"]}, "name": {"type": "string"},
                                      "image": {"$ref": "#/$defs/image"}, "extra": {}},
                       "required": ["type", "name"]},
            "image": {"type": "object", "additionalProperties": False,
                      "properties": {"url": {"type": "string"}, "credits": {"$ref": "#/$defs/credits"}}},
            "reference": {"type": "object", "additionalProperties": False,
                          "properties": {"type": {"enum": ["reference"]}, "id": {"type": "string"}},
                          "required": ["type", "id"]},
            "redirect": {"type": "object", "additionalProperties": False,
                         "properties": {"type": {"enum": ["redirect"]}, "url": {"type": "string"},
                                        "version": {"type": "string"}},
                         "required": ["type", "url"]},
            "content": {"type": "object", "additionalProperties": False,
                        "properties": {"type": {"type": "string"}, "version": {"type": "string"},
                                       "credits": {"$ref": "#/$defs/credits"}, "x": {}},
                        "required": ["type"]},
        },
        "$ref": "#/$defs/credits",
    }


def test_recursive_unions_met_at_a_member_stay_parts():
    schema = credits_schema()
    s = stats(schema)
    assert s["parts"] > 1 and not s["recursion_truncated"] and s["narrowed_by_budget"] == [], s
    author = {"type": "author", "name": "n"}
    for _ in range(12):  # credits nested 12 deep (jsonschema checks each level twice: 2^depth)
        author = {"type": "author", "name": "n", "image": {"url": "u", "credits": {"by": [author]}}}
    deep = json.dumps({"by": [author, {"type": "reference", "id": "r"}]})
    values = [
        deep, deep.replace('"name": "n"}', '"name": 1}', 1), deep.replace('"url": "u", ', '"url": 2, ', 1),
        {"by": [{"type": "reference", "id": "r"}], "photos": [author]},
        {"redirect": [{"type": "redirect", "url": "u"}]},
        {"redirect": [{"type": "redirect", "url": "u"}, {"type": "redirect", "url": "v"}]},  # maxItems 1
        {"redirect": [{"type": "redirect", "url": "u", "version": "1"}]},
        {"redirect": [{"type": "reference", "id": "r"}]},  # not a redirect
        {"redirect": [{"type": "redirect"}]},
        {"by": [{"type": "content"}]},  # content is not in by's own union
        {"other": [{"type": "content", "version": "2", "x": [1]}]},
        {"by": [{"type": "author", "name": "n", "extra": {"deep": [[[[{"a": None}]]]]}}]},
        {"Upper": []},  # the pattern matches the empty prefix of any key
    ]
    texts = [v if isinstance(v, str) else json.dumps(v) for v in values]
    got = match(schema, texts)
    assert got == [oracle(schema, t) for t in texts], got
    assert got[0] and not got[1] and not got[2], got
    # 50 deep: valid by construction (the oracle would take 2^50 steps),
    # and broken at the innermost level
    author = {"type": "author", "name": "n"}
    for _ in range(50):
        author = {"type": "author", "name": "n", "image": {"credits": {"by": [author]}}}
    deep = json.dumps({"by": [author]})
    assert match(schema, [deep, deep.replace('"name": "n"}', '"name": null}', 1)]) == [True, False]
    r = sieve("sample", schema, "-n", "30", "--seed", "5", "--max-len", "600")
    assert r.returncode == 0, r.stderr
    v = jsonschema.Draft202012Validator(schema)
    lines = r.stdout.split("\n")[:-1]
    assert len(lines) == 30
    for line in lines:
        x = json.loads(json.loads(line))
        assert v.is_valid(x), x
