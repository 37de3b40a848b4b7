"""A type beside a union is read off the union's first byte (fsm/schema_typed.c).

{"type": "object", "anyOf": [{"$ref": "#/$defs/config"}]} is how generators
often write a root whose definition names no type. Compiled as a product of
the type's language and the union's, it turned calls off for the whole union:
every `$ref` target below was inlined, and free-form values and recursion were
cut at a fixed depth. Now the union keeps its parts and the type cuts the
first bytes of the union's start, and of the parts that start calls. Each
case is checked against Python's jsonschema, and samples against it too.
"""
import json

import jsonschema

from suite import assert_agrees, compile_stats as stats, nested, sieve, sieve_match as match

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def samples_valid(schema, n=40):
    r = sieve("sample", schema, "-n", str(n), "--seed", "4", "--max-len", "400")
    assert r.returncode == 0, r.stderr
    v = jsonschema.Draft202012Validator(schema)
    lines = r.stdout.split("\n")[:-1]
    assert len(lines) == n
    for s in lines:
        x = json.loads(json.loads(s))
        assert v.is_valid(x), x


def config_defs():
    # no "type" in either definition: each accepts every non-object too
    return {
        "build": {"properties": {"artifacts": {"type": "array", "items": {"type": "string"}},
                                 "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                                 "extra": {}},
                  "additionalProperties": False},
        "config": {"required": ["kind"],
                   "properties": {"kind": {"enum": ["Config", "Profile"]},
                                  "build": {"$ref": "#/$defs/build"},
                                  "profiles": {"type": "array", "items": {"$ref": "#/$defs/config"}},
                                  "meta": {}},
                   "additionalProperties": False},
    }


def test_object_beside_a_ref_to_an_untyped_definition_keeps_its_parts():
    schema = {"$schema": DRAFT, "$defs": config_defs(), "type": "object",
              "anyOf": [{"$ref": "#/$defs/config"}]}
    s = stats(schema)
    assert s["parts"] > 1, s
    assert not s["recursion_truncated"], s
    deep = nested(50)
    prof = {"kind": "Profile"}
    for i in range(50):  # profiles nested 50 deep: the recursion is a call
        prof = {"kind": "Profile", "profiles": [prof], "meta": deep if i == 25 else i}
    values = [
        {"kind": "Config"}, {"kind": "Config", "build": {"artifacts": ["a"], "extra": deep}},
        {"kind": "Config", "build": {"artifacts": [1]}}, {"kind": "Config", "build": "text"},
        {"kind": "Config", "build": 5}, {"kind": "Config", "build": [1, 2]}, {"kind": "Config", "build": None},
        {"kind": "Config", "profiles": [prof]}, {"kind": "Config", "profiles": ["untyped"]},
        {"kind": "Config", "profiles": [{"kind": "X"}]}, {"kind": "Other"}, {"build": {}}, {"kind": "Config", "x": 1},
        # what config alone accepts and the type refuses
        "a string", 5, 1.5, -3, True, False, None, [], [{"kind": "Config"}],
    ]
    assert_agrees(schema, [json.dumps(v) for v in values])
    samples_valid(schema)


def test_type_lists_cut_each_branch_and_each_called_part():
    # branches of every type, some of them calls ($ref parts, free-form
    # values): the type list keeps exactly the branches whose first byte it
    # allows, in the union's own start and in the called parts' starts
    big = {"type": "object", "properties": {f"k{i}": {"type": "array", "items": {"type": "string"}} for i in range(12)}}
    untyped = {"properties": {"a": {"type": "integer"}, "b": {}}, "items": {"type": "integer"}}
    for types in (["object"], ["array"], ["string", "null"], ["number"], ["boolean", "object"],
                  ["array", "number", "string"]):
        schema = {"$schema": DRAFT, "$defs": {"big": big, "untyped": untyped}, "type": types,
                  "anyOf": [{"$ref": "#/$defs/big"}, {"$ref": "#/$defs/untyped"}, {"type": "string", "maxLength": 3},
                            {"enum": [1, "on", None, True, [1]]}, {}]}
        stats(schema)
        deep = nested(50)
        values = [{"k0": ["a"]}, {"k0": [1]}, {"a": 1, "b": deep}, {"a": "x"}, {"z": deep}, [1, 2], ["s"], [deep],
                  "abc", "abcdef", 1, 2.5, -7, None, True, False, [1], "on", {}, []]
        assert_agrees(schema, [json.dumps(v) for v in values])
        samples_valid(schema, 20)


def test_oneof_union_beside_a_type():
    # a oneOf whose branches are disjoint (different required tags) is a
    # union: the type cuts it the same way
    schema = {"$schema": DRAFT, "type": "object",
              "$defs": {"a": {"required": ["tag"], "properties": {"tag": {"const": "a"}, "v": {"type": "integer"}}},
                        "b": {"required": ["tag"], "properties": {"tag": {"const": "b"}, "w": {}}}},
              "oneOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}]}
    deep = nested(50)
    values = [{"tag": "a", "v": 1}, {"tag": "a", "v": "x"}, {"tag": "b", "w": deep}, {"tag": "c"}, {}, "a", 1, None,
              [{"tag": "a"}]]
    assert_agrees(schema, [json.dumps(v) for v in values])
    samples_valid(schema, 20)


def test_integer_beside_a_union_stays_a_product():
    # integers are not told by their first byte: "integer" keeps the product
    schema = {"$schema": DRAFT, "type": "integer", "anyOf": [{"minimum": 3}, {"type": "string"}]}
    values = [3, 4, 2, 3.5, -1, "x", None, 100]
    assert_agrees(schema, [json.dumps(v) for v in values])
    # 4.0 is valid, but an integer is written plainly outside differences
    assert match(schema, ["4.0", "4", "100.0"]) == [False, True, False]


def test_a_type_no_branch_has_is_empty():
    schema = {"$schema": DRAFT, "type": "array", "anyOf": [{"type": "object"}, {"type": "string"}]}
    r = sieve("compile", schema)
    assert r.returncode == 2, r.stdout
    assert json.loads(r.stdout)["error"]["type"] == "empty", r.stdout


def test_a_recursive_branch_is_cut_once_compiled():
    # node's `kids` items are objects among node (being compiled: its part
    # is still open there) and leaf, neither typed: the cut of node's part
    # waits until node is done (sv_sc_type_filter_finish). (Closed objects:
    # open ones would put a free-form value beside node's `kids` array, a
    # competing call into a recursion that expansion cannot close.)
    schema = {"$schema": DRAFT, "$ref": "#/$defs/node",
              "$defs": {"node": {"properties": {"name": {"type": "string"},
                                                "kids": {"type": "array",
                                                         "items": {"type": "object",
                                                                   "anyOf": [{"$ref": "#/$defs/node"},
                                                                             {"$ref": "#/$defs/leaf"}]}}},
                                 "required": ["name"], "additionalProperties": False},
                        "leaf": {"properties": {"value": {"type": "integer"}}, "required": ["value"],
                                 "additionalProperties": False}}}
    s = stats(schema)
    assert not s["recursion_truncated"], s

    def tree(d, bad=None):
        t = {"name": "n%d" % d, "kids": [{"value": d}]}
        for i in range(d):
            t = {"name": "n%d" % i, "kids": [t, {"value": i}] if i != bad else [t, "leaf"]}
        return t

    values = [tree(0), tree(50), tree(50, bad=20), tree(50, bad=49), {"name": "x", "kids": [5]},
              {"name": "x", "kids": [{"value": "s"}]}, {"name": "x", "kids": [{"name": 1}]}, "s", 5, None, [],
              {"kids": []}, {"name": "x", "kids": [{}]}]
    assert_agrees(schema, [json.dumps(v) for v in values])
    samples_valid(schema, 20)
