"""Member values that hold objects or arrays are parts of their own.

Inline, a sub-object is determinized and minimized again by every object
around it; as a part (16 states or more, starting with `{` or `[`) it is
compiled once and called (schema_container.c, docs/fsm.md "Container
values"). Scalars stay inline, so a union of objects told apart by a tag's
literal keeps its bytes. Where two objects of a union call different
containers behind one key, the linker refuses the program and the compile
is redone with only big values as parts: it must still compile whole and
agree with jsonschema. Each case is checked against Python's jsonschema.
"""
import json
import random

from suite import assert_agrees, compile_stats as stats

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def chain(depth):
    """Objects nested depth levels under "child", the required key last (so
    each object accepts two key orders)."""
    s = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
         "required": ["name"], "additionalProperties": False}
    for _ in range(depth):
        s = {"type": "object", "required": ["name"], "additionalProperties": False,
             "properties": {"id": {"type": "integer"}, "child": s, "tags": {"type": "array", "items": s},
                            "name": {"type": "string"}}}
    return {"$schema": DRAFT, **s}


def random_chain_value(rng, depth):
    v = {}
    if rng.random() < 0.5:
        v["id"] = rng.choice([1, -7, "x"])
    if depth and rng.random() < 0.6:
        v["child"] = random_chain_value(rng, depth - 1)
    if depth and rng.random() < 0.3:
        v["tags"] = [random_chain_value(rng, depth - 1) for _ in range(rng.randrange(3))]
    if rng.random() < 0.9:
        v["name"] = rng.choice(["a", "", 3])
    if rng.random() < 0.1:
        v["extra"] = 1
    return v


def test_nested_objects_are_parts_and_agree_with_jsonschema():
    schema = chain(6)
    s = stats(schema)
    # every level's sub-object (as "child" and as the items of "tags") is
    # one part: at least one part per level below the top
    assert s["parts"] >= 6, s
    rng = random.Random(7)
    texts = sorted({json.dumps(random_chain_value(rng, 6)) for _ in range(150)})
    assert_agrees(schema, texts)


def test_scalars_stay_inline():
    # a long literal and an enum are scalars: no part for them
    schema = {"$schema": DRAFT, "type": "object", "required": ["kind", "mode"], "additionalProperties": False,
              "properties": {"kind": {"const": "a_rather_long_tag_name_for_this_branch"},
                             "mode": {"enum": ["alpha_mode", "beta_mode", "gamma_mode", "delta_mode"]}}}
    assert stats(schema)["parts"] == 1


def test_union_of_objects_with_containers_behind_one_key():
    # {"data": ...} in both branches, a different object behind it: a call
    # at the state after `{"data": ` would compete with the other branch's
    # call, so the compile is redone with those values inline.
    def branch(key, t):
        inner = {"type": "object", "required": [key], "additionalProperties": False,
                 "properties": {key: {"type": t}, "note": {"type": "string"}}}
        return {"type": "object", "required": ["data"], "additionalProperties": False,
                "properties": {"data": inner, "kind": {"type": "string"}}}
    schema = {"$schema": DRAFT, "anyOf": [branch("count", "integer"), branch("label", "string")]}
    stats(schema)
    texts = []
    for data in ({"count": 3}, {"label": "x"}, {"count": "x"}, {"label": 2}, {}, {"count": 1, "note": "n"},
                 {"label": "y", "count": 1}, {"count": 1, "note": 2}):  # keys in schema order
        for kind in (None, "k", 5):
            v = {"data": data}
            if kind is not None:
                v["kind"] = kind
            texts.append(json.dumps(v))
    assert_agrees(schema, texts)


def test_tagged_union_of_tool_like_objects_keeps_calls():
    # tool calls: a long name literal per branch, the arguments an object;
    # compiles with the arguments as parts (the literals tell the branches
    # apart) and agrees with jsonschema
    def tool(name, key):
        return {"type": "object", "required": ["name", "arguments"], "additionalProperties": False,
                "properties": {"name": {"const": name},
                               "arguments": {"type": "object", "required": [key], "additionalProperties": False,
                                             "properties": {key: {"type": "string"}, "n": {"type": "integer"}}}}}
    schema = {"$schema": DRAFT, "type": "array", "minItems": 1,
              "items": {"anyOf": [tool("get_current_weather_for_city", "city"),
                                  tool("get_current_time_for_zone", "zone")]}}
    s = stats(schema)
    assert s["parts"] >= 3, s  # the root and each tool's arguments
    texts = [json.dumps(v) for v in (
        [{"name": "get_current_weather_for_city", "arguments": {"city": "Oslo"}}],
        [{"name": "get_current_time_for_zone", "arguments": {"zone": "UTC", "n": 1}}],
        [{"name": "get_current_time_for_zone", "arguments": {"city": "Oslo"}}],
        [{"name": "get_current_weather_for_city", "arguments": {"city": 1}}],
        [{"name": "get_current_weather_for_city", "arguments": {"city": "a"}},
         {"name": "get_current_time_for_zone", "arguments": {"zone": "b"}}],
        [], [{"name": "other", "arguments": {}}])]
    assert_agrees(schema, texts)
