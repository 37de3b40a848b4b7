"""Competing calls in a union are expanded, not compiled flat.

A union of open objects where one branch leaves a member free (a call to the
free-form part) and another spells it out (`"qubits": {"maxItems": 1}`: an
array read byte by byte) leaves a state after `"qubits": ` that both calls
and reads `[`. The linker expands such calls in their caller, one container
level a round, until the choices no longer compete (program.c, "competing
choices, resolved by expansion"; docs/fsm.md). Before, the linker refused the
program and the schema compiled flat, its free-form values cut at a fixed
depth. Each case is checked against Python's jsonschema, on values nested
50 deep as well as random ones.
"""
import json
import random

from suite import assert_agrees, compile_stats as stats, nested

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def qiskit_like():
    """MaskBench's Github_easy---o24467 in small: instructions as an anyOf of
    open objects that bound some members' lengths and leave others free."""
    def op(names, qubits, params=None, required=("qubits",)):
        props = {"name": {"enum": names}, "qubits": {"maxItems": qubits}, "clbits": {"maxItems": 0}}
        if params is not None:
            props["params"] = {"minItems": params, "maxItems": params}
        return {"required": list(required), "properties": props}
    return {"$schema": DRAFT, "type": "object",
            "properties": {"instructions": {"type": "array", "items": {"anyOf": [
                op(["u3"], 1, 3, ("qubits", "params")),
                op(["h", "x"], 1),
                op(["cx"], 2, 0),
                {"properties": {"name": {"pattern": "^#.+"}}},
            ]}}}}


def test_free_member_beside_a_spelled_array_keeps_calls():
    schema = qiskit_like()
    s = stats(schema)
    assert "calls" not in s["narrowed_by_budget"], s
    assert s["parts"] > 1, s
    deep = nested(50)
    values = [
        {"instructions": [{"name": "u3", "qubits": [0], "params": [1.5, 0, 3.1]}]},
        {"instructions": [{"name": "u3", "qubits": [0, 1], "params": [1, 2, 3]}]},
        {"instructions": [{"name": "u3", "qubits": [0]}]},
        {"instructions": [{"name": "cx", "qubits": [0, 1], "clbits": []}]},
        {"instructions": [{"name": "cx", "qubits": [0, 1], "clbits": [1]}]},
        {"instructions": [{"name": "#pragma", "qubits": deep, "clbits": deep}]},
        {"instructions": [{"name": "h", "qubits": [deep], "texparams": deep}]},
        {"instructions": [{"name": "h", "qubits": [deep, 1], "texparams": deep}]},
        {"instructions": [{"name": "h", "qubits": [[{"b": [deep]}]], "extra": {"a": deep}}]},
        {"instructions": [{"name": "x", "qubits": [1], "clbits": [deep]}]},
        {"instructions": [{"name": "zz", "qubits": [1]}]},
        {"instructions": [{"qubits": {"k": deep}}]},
    ]
    assert_agrees(schema, [json.dumps(v) for v in values])


def test_recursive_part_beside_a_spelled_tree():
    # a tree whose children are trees (a recursive part), in a union with an
    # object that spells a two-level `children` out: after `"children": `
    # the call to the tree's part meets the other branch's `[`
    tree = {"type": "object", "properties": {"v": {"type": "integer"},
                                              "children": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}}
    leafy = {"type": "object", "required": ["leaf"],
             "properties": {"leaf": {"type": "boolean"},
                            "children": {"type": "array", "maxItems": 2,
                                         "items": {"type": "array", "items": {"type": "string"}}}}}
    schema = {"$schema": DRAFT, "$defs": {"tree": tree},
              "anyOf": [{"$ref": "#/$defs/tree"}, leafy]}
    s = stats(schema)
    assert not s["recursion_truncated"], s
    assert "calls" not in s["narrowed_by_budget"], s

    def deep_tree(d):
        t = {"v": d}
        for i in range(d):
            t = {"v": i, "children": [t, {"v": -i}]}
        return t

    broken = deep_tree(50)
    node = broken
    for _ in range(49):
        node = node["children"][0]
    node["v"] = "x"
    values = [deep_tree(50), broken, {"leaf": True, "children": [["a"], []]},
              {"leaf": True, "children": [["a"], [], []]}, {"leaf": False, "children": [[1]]},
              {"children": [["a"]]}, {"children": [{"v": 1}], "leaf": True}, {"v": 1, "children": []}]
    assert_agrees(schema, [json.dumps(v) for v in values])


def random_branch(rng, keys):
    props = {}
    for k in keys:
        props[k] = rng.choice([
            {},  # free: a call
            {"type": "array", "maxItems": rng.randrange(1, 3)},  # items free
            {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            {"type": "object", "properties": {"z": {"type": "array", "items": {"type": "integer"}}}},
            {"type": "integer"},
        ])
    b = {"type": "object", "properties": props}
    if rng.random() < 0.5:
        b["required"] = [rng.choice(keys)]
    return b


def random_value(rng, depth):
    r = rng.random()
    if depth <= 0 or r < 0.3:
        return rng.choice([0, 7, "s", True, None])
    if r < 0.65:
        return [random_value(rng, depth - 1) for _ in range(rng.randrange(3))]
    # declared keys before extra ones, as sieve's key order has them ("z"
    # is the one key a branch declares inside)
    keys = sorted({rng.choice("abz") for _ in range(rng.randrange(3))}, key="zab".index)
    return {k: random_value(rng, depth - 1) for k in keys}


def test_random_unions_of_open_objects_agree_with_jsonschema():
    rng = random.Random(11)
    for _ in range(8):
        keys = ["a", "b"]
        schema = {"$schema": DRAFT, "anyOf": [random_branch(rng, keys) for _ in range(rng.randrange(2, 4))]}
        stats(schema)
        texts = set()
        while len(texts) < 60:
            v = {k: random_value(rng, 4) for k in keys if rng.random() < 0.8}
            texts.add(json.dumps(v))
        texts.add(json.dumps({"a": nested(50), "b": [nested(50)]}))
        texts.add(json.dumps({"a": [[nested(50)]], "b": {"z": [nested(50)]}}))
        assert_agrees(schema, sorted(texts))


def test_free_member_beside_a_spelled_array_inside_a_product():
    # the union meets a `not` in a product: the operand that both calls the
    # free-form part and reads `[` after `"a": ` is determinized again with
    # that call expanded before the product (schema.c, sv_sc_product), where
    # before the whole compile started again with free-form values flat in
    # products. (The `not` still spells the universe at its location out to
    # the free-form depth, docs/fsm.md: values there stay shallow.)
    schema = {"$schema": DRAFT,
              "anyOf": [{"type": "object", "properties": {"a": {}}},
                        {"type": "object", "properties": {"a": {"type": "array",
                                                                "items": {"type": "array", "items": {"type": "integer"}}}}}],
              "not": {"type": "object", "properties": {"a": {"const": 5}}, "required": ["a"]}}
    s = stats(schema)
    assert s["parts"] > 1, s
    values = [{"a": [[1, 2]]}, {"a": [[1, "x"]]}, {"a": ["x"]}, {"a": 5}, {"a": 6}, {"a": [5]}, {"a": {"k": 1}},
              {}, {"b": [1]}, {"a": [[1], {"x": 2}]}, {"a": [[]], "b": 5}, {"a": "s", "b": {"c": [1]}}]
    assert_agrees(schema, [json.dumps(v) for v in values])


def test_value_parts_inside_a_product_are_expanded_there():
    # `Palette` meets the object of the pattern `^[^/]` in a product; its
    # member `c` is a container value, a part of its own. Only the
    # free-form part is called inside products, so the operand is
    # determinized again with `c`'s call expanded (its free-form values
    # still calls), where before the whole compile started again with
    # fewer parts (MaskBench's IntelliJ theme schemas, Github_hard---o76944).
    schema = {"$schema": DRAFT, "type": "object",
              "properties": {"Palette": {"type": "object", "properties": {
                  "a": {"type": "string"},
                  "c": {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "integer"}},
                                                         "y": {"type": "string"}}},
                  "d": {}}}},
              "patternProperties": {"^[^/]": {"type": "object", "patternProperties": {"^/": {"type": "string"}}}}}
    s = stats(schema)
    assert s["parts"] >= 3, s
    deep = nested(50)
    values = [{"Palette": {"a": "s", "c": {"x": [1], "y": "t"}, "d": deep}}, {"Palette": {"a": 1}},
              {"Palette": {"c": {"x": ["s"]}}}, {"Palette": {"a": "s", "/p": "q"}}, {"Palette": {"a": "s", "/p": 1}},
              {"Palette": {"c": {"x": [1], "z": deep}}}, {"Palette": {"c": {"x": [1], "/z": deep}}},
              {"Other": {"/k": "v"}}, {"Other": {"/k": 1}}, {"Other": 5}, {"/top": deep}]
    assert_agrees(schema, [json.dumps(v) for v in values])
