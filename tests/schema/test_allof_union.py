"""An allOf distributed over a union among its conjuncts.

{"allOf": [base, {"oneOf": [kind1, kind2, ...]}]}, as API descriptions write
an object base beside a union of its kinds, is (base and kind1) or (base and
kind2) or ...; each of those merges into one plain object, so the union is
one of objects whose values are parts, instead of a product of the base's
automaton with the union's (schema.c distribute_allof). A oneOf is taken so
only where the merged objects are proven disjoint (the tag is often required
by the base alone); where the kinds hold different containers behind one key
before the tag, the union calls two values at one state, and the linker
expands those calls in the union (program.c), where before the compile was
redone without distributing. Each case is checked against Python's
jsonschema.
"""
import json

from suite import assert_agrees, compile_stats as stats, oracle, sieve_match

DRAFT4 = "http://json-schema.org/draft-04/schema#"


def settings(keys):
    """An object value big enough to be a part of its own."""
    return {"type": "object", "additionalProperties": False,
            "properties": {k: {"type": "string", "maxLength": 12} for k in keys}}


def kinds_schema(union, tag_first=True, n=4):
    base = {"type": "object", "required": ["name", "kind"] if tag_first else ["name"],
            "properties": {"name": {"type": "string"}, "note": {"type": "string"}}}
    kinds = {}
    for i in range(n):
        props = {"kind": {"enum": [f"kind_{i}"]}, "settings": settings([f"opt_{i}_{j}" for j in range(3)])}
        if not tag_first:  # the tag after the container, as Github_ultra---o359 orders it
            props = {"settings": props["settings"], "kind": props["kind"]}
        kinds[f"k{i}"] = {"type": "object", "properties": props}
    return {"$schema": DRAFT4, "definitions": {"base": base, **kinds},
            "type": "object", "required": ["kind", "settings"],
            "allOf": [{"$ref": "#/definitions/base"},
                      {union: [{"$ref": f"#/definitions/k{i}"} for i in range(n)]}]}


def texts_for(n, tag_first):
    out = []
    for i in range(n):
        for j in (i, (i + 1) % n):
            for note in (None, "x", 3):
                v = {"name": "a"}
                if note is not None:
                    v["note"] = note
                s = {f"opt_{j}_0": "v", f"opt_{j}_2": "w"}
                if tag_first:
                    v["kind"], v["settings"] = f"kind_{i}", s
                else:
                    v["settings"], v["kind"] = s, f"kind_{i}"
                out.append(json.dumps(v))
    out += [json.dumps(v) for v in ({"name": "a"}, {"name": "a", "kind": "kind_9", "settings": {}},
                                    {"kind": "kind_0", "settings": {}}, {"name": "a", "kind": "kind_0"})]
    return out


def test_oneof_of_kinds_is_a_union_of_merged_objects():
    for union in ("oneOf", "anyOf"):
        schema = kinds_schema(union)
        # each kind's settings is a part of its own, called from its merged
        # object; the product path builds them flat inside one automaton
        assert stats(schema)["parts"] >= 5, union
        assert_agrees(schema, texts_for(4, True))


def test_tag_named_by_base_and_kind_is_proven_disjoint():
    # the base gives the tag a type, each kind a value: the merged member is
    # {"allOf": [type, enum]}, which the disjointness proof sees through
    schema = kinds_schema("oneOf")
    schema["definitions"]["base"]["properties"]["kind"] = {"type": "string"}
    assert stats(schema)["parts"] >= 5
    assert_agrees(schema, texts_for(4, True))


def test_tag_after_different_containers_expands_and_agrees():
    # the kinds' settings objects are called at one state, before the tag:
    # the calls are expanded in the union, which keeps its parts
    schema = kinds_schema("oneOf", tag_first=False, n=3)
    s = stats(schema)
    assert "calls" not in s["narrowed_by_budget"], s
    assert_agrees(schema, texts_for(3, False))


def closed(s):
    """The schema --strict-properties reads: every object schema that names
    properties (or none) and no additionalProperties is closed."""
    if isinstance(s, list):
        return [closed(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {k: closed(v) if k not in ("required", "enum", "const") else v for k, v in s.items()}
    if "properties" in s or s.get("type") == "object":
        out.setdefault("additionalProperties", False)
    return out


def test_strict_properties_closes_each_conjunct():
    # With --strict-properties each conjunct is closed over its own
    # properties: the allOf below allows only {} (and so neither merges nor
    # distributes into one object that would take both keys).
    plain = {"$schema": DRAFT4, "allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]}
    union = {"$schema": DRAFT4, "allOf": [{"properties": {"a": {}}},
                                          {"anyOf": [{"properties": {"a": {}, "b": {}}},
                                                     {"properties": {"a": {}, "c": {}}}]}]}
    texts = ['{}', '{"a": 1}', '{"b": 1}', '{"a": 1, "b": 2}', '{"c": 3}']
    for schema in (plain, union):
        got = sieve_match(schema, texts, "--strict-properties")
        assert got == [oracle(closed(schema), t) for t in texts], (schema, got)


def test_distributed_union_keeps_definition_order():
    # The union's keys stand where the union stands among the conjuncts:
    # `a`/`b` before `e`, as the schema defines them (and as the product
    # path orders them). The branch's conjuncts used to be merged after the
    # others, so `e` came first and `{"a": .., "e": ..}` was refused.
    schema = {"$schema": DRAFT4, "allOf": [
        {"anyOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "string"}}}]},
        {"properties": {"e": {"type": "string"}}}]}
    texts = ['{"a": "x", "e": "B"}', '{"b": "x", "e": "B"}', '{"a": "x", "e": 1}', '{"b": "x", "e": 2}', '{"e": "B"}',
             '{"a": "x"}', '{"a": 1, "b": 2}']
    assert_agrees(schema, texts)


def test_union_beside_required_is_distributed():
    # {"anyOf": [closed kinds], "required": [...]} (Skaffold's Artifact) is
    # the same conjunction without the word allOf: the object's own
    # required keys and properties are one conjunct, the union another.
    # Distributed, each kind keeps its container value as a part; met in a
    # product, the union's automaton is built flat. Both unions agree with
    # jsonschema, with and without members typed beside them.
    kinds = []
    for i in range(4):
        kinds.append({"additionalProperties": False, "required": ["kind"], "properties": {
            "image": {"type": "string"}, "context": {"type": "string"}, "kind": {"enum": [f"kind_{i}"]},
            f"tool_{i}": settings([f"opt_{i}_{j}" for j in range(3)])}})
    texts = []
    for i in range(4):
        for img in (None, "app", 7):
            for ctx in (None, "."):  # keys in definition order, as sieve writes them
                v = {} if img is None else {"image": img}
                if ctx is not None:
                    v["context"] = ctx
                v["kind"] = f"kind_{i}"
                v[f"tool_{i}"] = {f"opt_{i}_0": "a", f"opt_{i}_2": "b"}
                texts.append(json.dumps(v))
            texts.append(json.dumps({**v, f"tool_{(i + 1) % 4}": {}}))
    texts += ['{}', '{"image": "a"}', '{"image": "a", "kind": "kind_1"}', '{"image": "a", "kind": "kind_9"}',
              '{"image": "a", "context": 1, "kind": "kind_0"}', '{"image": "a", "kind": "kind_0", "other": 1}', '[]', '"x"']
    for union in ("anyOf", "oneOf"):
        for extra in ({}, {"properties": {"image": {"type": "string", "maxLength": 8}}}):
            schema = {union: kinds, "required": ["image"], **extra}
            # (this oneOf is not proven disjoint, and members beside the union
            # keep the product, whose key orders take the branches' too)
            if union == "anyOf" and not extra:
                assert stats(schema)["parts"] >= 4, (union, extra)
            assert_agrees(schema, texts)
