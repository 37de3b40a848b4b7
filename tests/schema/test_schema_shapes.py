"""Malformed subschemas are refused wherever they are (fsm/schema.c,
check_shapes), before anything is compiled.

The compilers read only the subschemas they need: a branch that cannot
match is dropped unread, and programs read subschemas in another order than
flat automata. A subschema that is neither an object nor a boolean used to
be a syntax error under some options and silently ignored under others
(found by fuzz/fuzz_schema.c: with --strict-properties, an anyOf branch
requiring a key it does not define held `"contains": [...]`). Now it is a
syntax error with its JSON pointer under every option; so is a `$ref` that
is no string, wherever it stands."""
import json

import pytest

from suite import sieve as run, sieve_match

CASES = [
    # the fuzzer's case, reduced: with --strict-properties the second branch
    # cannot hold its required key, and flat compiles used to drop it unread
    ({"anyOf": [{"type": "object", "required": ["type"], "properties": {"type": {"enum": ["r"]}, "u": {"type": "string"}}},
                {"type": "object", "required": ["type"], "properties": {"\"": {"contains": ["x"]}}}]},
     "/anyOf/1/properties/\"/contains"),
    ({"properties": {"a/b~": {"items": [{"type": "string"}, 3]}}}, "/properties/a~1b~0/items/1"),
    ({"oneOf": [{"type": "integer"}, {"not": "string"}]}, "/oneOf/1/not"),
    ({"if": {"type": "object"}, "then": {"additionalProperties": []}}, "/then/additionalProperties"),
    ({"$defs": {"unused": 7}, "type": "string"}, "/$defs/unused"),
    ({"dependencies": {"a": ["b"], "c": None}}, "/dependencies/c"),
    # fuzz/corpus/schema/crash-ref-not-a-string, reduced: a $ref that is no
    # string, in a oneOf branch that cannot hold its required key (flat
    # compiles dropped it unread, programs read it)
    ({"$defs": {"node": {"oneOf": [
        {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"], "additionalProperties": False},
        {"type": "object", "properties": {"c": {"type": "array", "items": {"$ref": ["#/$defs/node"]}}},
         "required": ["kind"], "additionalProperties": False}]}}, "$ref": "#/$defs/node"},
     "/$defs/node/oneOf/1/properties/c/items/$ref"),
]

OPTIONS = [[], ["--strict-properties"], ["--any-calls", "false"], ["--strict-properties", "--any-calls", "false"],
           ["--key-order", "any", "--strict-properties"]]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_malformed_subschema_refused_under_every_option(case):
    schema, pointer = CASES[case]
    for opts in OPTIONS:
        r = run("compile", schema, *opts)
        assert r.returncode == 2, (opts, r.stdout)
        e = json.loads(r.stdout)["error"]
        assert e["type"] == "syntax" and e["pointer"] == pointer, (opts, e)


def test_well_formed_subschemas_compile():
    schema = {"items": [{"type": "string"}], "additionalItems": False, "dependencies": {"a": ["b"]},
              "properties": {"x": True, "y": {}}, "allOf": [True], "$defs": {"d": False}}
    r = run("compile", schema)
    assert r.returncode == 0, r.stdout


# A branch that cannot hold one of its required keys is empty before any of
# its member values is read (fsm/schema_container.c, sv_sc_object), so a
# keyword sieve refuses inside it never decides the outcome, whatever order
# the options read the keys in. Found by fuzz/fuzz_schema.c
# (fuzz/corpus/schema/crash-unsupported-in-dead-branch): with calls, each
# union branch takes its own key order and read `children` before `kind`.
DEAD = {"type": "object", "properties": {"children": {"unevaluatedItems": False}},
        "required": ["kind", "children"], "additionalProperties": False}
LIVE = {"type": "object", "properties": {"kind": {"const": "leaf"}}, "required": ["kind"],
        "additionalProperties": False}
DEAD_BRANCHES = [
    {"oneOf": [LIVE, DEAD]},
    {"anyOf": [LIVE, DEAD]},
    # the key is there but false
    {"anyOf": [LIVE, dict(DEAD, properties={"children": {"unevaluatedItems": False}, "kind": False},
                          additionalProperties=True)]},
    # a pattern property makes it false
    {"anyOf": [LIVE, dict(DEAD, patternProperties={"^ki": False}, additionalProperties=True)]},
    # additionalProperties lets it in, but only as a schema that is false
    {"anyOf": [LIVE, dict(DEAD, additionalProperties={"allOf": [False, {"exclusiveMaximum": 10}]})]},
    # propertyNames refuses it
    {"anyOf": [LIVE, dict(DEAD, propertyNames={"maxLength": 3}, additionalProperties=True)]},
]


@pytest.mark.parametrize("case", range(len(DEAD_BRANCHES)))
def test_refused_keyword_in_dead_branch_alike_under_every_option(case):
    for opts in OPTIONS:
        r = run("compile", DEAD_BRANCHES[case], *opts)
        assert r.returncode == 0, (opts, r.stdout)
        # the live branch only
        texts = [json.dumps(v) for v in ({"kind": "leaf"}, {"kind": "leaf", "children": []}, {"kind": "x"})]
        assert sieve_match(DEAD_BRANCHES[case], texts, *opts) == [True, False, False], opts
