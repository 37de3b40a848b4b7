"""Spellings and complement (docs/fsm.md): a language may accept more than one
spelling of a value (10 and 10.0, 1e-05 and 0.00001, a few key orders per
object), but `not`, overlapping `oneOf` and `if`/`else` must then still reject
every spelling of every value they exclude. Each case lists candidate texts in
several spellings; sieve may reject a valid one only if it is not in `want`,
and must never accept an invalid one (judged by jsonschema, numbers read as
exact decimals, 10.0 an integer from draft 6 on)."""
import itertools
import json
import subprocess
import tempfile
from decimal import Decimal

import pytest

import suite
from test_sampling import validator

D4 = "http://json-schema.org/draft-04/schema#"

# (schema, candidate texts, texts sieve must accept)
CASES = [
    # integers: 10.0 and -0.0 are integers from draft 6 on, not in draft 4
    ({"not": {"type": "integer"}}, ["10", "10.0", "-0.0", "0.0", "0", "10.5", "1e-05", "1e+16", "-10.0"],
     ["10.5"]),
    ({"$schema": D4, "not": {"type": "integer"}}, ["10", "10.0", "-0.0", "10.5"], ["10.0", "-0.0", "10.5"]),
    # an integer outside differences is written plainly (5, not 5.0: docs/json-schema.md)
    ({"type": "integer", "minimum": 5}, ["5", "5.0", "4.0", "-0.0", "6.00"], ["5"]),
    ({"$schema": D4, "type": "integer"}, ["5", "5.0"], ["5"]),
    ({"type": "integer", "enum": [0, 3]}, ["0", "0.0", "-0.0", "3", "3.0", "1"], ["0", "0.0", "-0.0", "3", "3.0"]),
    ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, ["3", "3.0", "3.5", "1e-05", "-0.0", "1e+16"], ["3.5"]),
    # exponents: Python's repr spellings, kept where a bound holds for the whole exponent range
    ({"type": "number"}, ["1e-05", "1.256e-06", "1e+16", "-2.5e+300", "1e16", "1E-05", "1e-5", "1.0e-05", "1e-04"],
     ["1e-05", "1.256e-06", "1e+16", "-2.5e+300"]),
    ({"type": "number", "exclusiveMinimum": 0}, ["1e-05", "-1e-05", "1e+16", "-1e+16", "0", "0.0"],
     ["1e-05", "1e+16"]),
    ({"type": "number", "minimum": 0, "maximum": 1}, ["1e-05", "-1e-05", "1e+16", "0.5", "1.0"], ["1e-05", "0.5", "1.0"]),
    ({"type": "number", "minimum": 0.00005}, ["1e-05", "6e-05", "0.00006", "1e+16"], ["0.00006", "1e+16"]),
    ({"type": "number", "maximum": -0.00005}, ["-1e-05", "-6e-05", "-1e+16", "1e-05"], ["-1e+16"]),
    ({"type": "number", "multipleOf": 0.5}, ["1e-05", "1e+16", "1.5", "2.0"], ["1.5", "2.0"]),
    ({"not": {"const": 0.00001}}, ["1e-05", "0.00001", "0.00002", "2e-05"], ["0.00002"]),
    ({"const": 0.00001}, ["1e-05", "0.00001", "1.0e-05"], ["1e-05", "0.00001"]),
    ({"enum": [1e16, 2]}, ["1e+16", "10000000000000000", "10000000000000000.0", "2", "2.0"],
     ["1e+16", "10000000000000000", "2", "2.0"]),
    ({"oneOf": [{"type": "number", "minimum": 0}, {"type": "number", "maximum": 0}]},
     ["0", "0.0", "-0.0", "1e-05", "-1e-05", "1", "-1"], ["1", "-1"]),
    ({"if": {"type": "integer"}, "then": {"minimum": 10}, "else": {"type": "number"}},
     ["5", "5.0", "10", "10.0", "5.5", "1e-05", "\"x\""], ["10", "10.0", "5.5"]),
    ({"allOf": [{"enum": [{"a": 0.0}]}, {"not": {"enum": [{"a": False}]}}]}, ['{"a": 0.0}', '{"a": 0}', '{"a": false}'],
     ['{"a": 0.0}', '{"a": 0}']),
    # key orders: branches and required lists add orders; differences keep them exact
    ({"anyOf": [{"properties": {"a": {}, "b": {}}, "additionalProperties": False},
                {"properties": {"b": {}, "a": {}, "c": {}}, "additionalProperties": False}]},
     [{"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}], [{"a": 1, "b": 2}]),
    ({"properties": {"a": {}, "b": {}}, "required": ["b", "a"], "not": {"properties": {"a": {"type": "integer"}}}},
     [{"a": "x", "b": 1}, {"a": 1, "b": 1}, {"b": 1}], [{"a": "x", "b": 1}]),
    ({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "oneOf": [{"required": ["b", "a"]}, {"required": ["a"]}]},
     [{"a": 1, "b": 2}, {"a": 1}, {"b": 2}], [{"a": 1}]),
    ({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
      "required": ["y"], "dependentRequired": {"x": ["y"]}, "if": {"required": ["x"]}, "then": {"maxProperties": 2}},
     [{"x": 1, "y": 2}, {"x": 1, "y": 2, "z": 3}, {"y": 2}, {"x": 1}], [{"x": 1, "y": 2}, {"y": 2}]),
    # a difference's universe holds the location's key orders: an overlapping oneOf keeps a branch's
    # required order (JSON Schema Store's imagegeoref), and a literal it subtracts is subtracted in
    # every one of them (spelled in one order, {"a": 1, "b": 2} would pass in the other)
    ({"type": "object", "oneOf": [{"properties": {"data": {}, "kind": {}}, "required": ["data", "kind"]},
                                  {"properties": {"h": {}, "w": {}}, "required": ["w", "h"]}]},
     [{"w": 1, "h": 2}, {"data": 1, "kind": 2, "w": 1, "h": 2}], ['{"w": 1, "h": 2}', '{"h": 2, "w": 1}']),
    ({"oneOf": [{"properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}, "required": ["a", "b"]},
                {"const": {"a": 1, "b": 2}}]},
     [{"a": 1, "b": 2}, {"a": 1, "b": 3}], ['{"a": 1, "b": 3}', '{"b": 3, "a": 1}']),
    ({"not": {"properties": {"q": {"enum": [{"x": 1, "y": 2}]}}, "required": ["q"]},
      "properties": {"q": {"properties": {"y": {}, "x": {}}, "required": ["x", "y"]}}},
     [{"q": {"x": 1, "y": 2}}, {"q": {"x": 1, "y": 3}}], ['{"q": {"x": 1, "y": 3}}', '{"q": {"y": 3, "x": 1}}']),
    # a tag whose branches put their own keys between it and a shared key: the location's order
    # keeps every branch's (Github_hard---o17529's asserts)
    ({"type": "array", "items": {"oneOf": [
        {"properties": {"assert": {"enum": ["Blank"]}, "message": {"type": "string"}}},
        {"properties": {"assert": {"enum": ["Email"]}, "strict": {"type": "boolean"}, "mx": {"type": "boolean"},
                        "message": {"type": "string"}}},
        {"properties": {"assert": {"enum": ["Length"]}, "min": {"type": "integer"}, "max": {"type": "integer"},
                        "minMessage": {"type": "string"}}},
        {"properties": {"assert": {"enum": ["Range"]}, "min": {"type": ["integer", "string"]},
                        "max": {"type": ["integer", "string"]}, "invalidMessage": {"type": "string"}}}]}},
     ['[{"assert": "Email", "strict": true, "mx": false, "message": "m"}, {"assert": "Blank", "message": "m"}]',
      '[{"assert": "Length", "min": 1, "max": 2, "minMessage": "m"}]', '[{"message": "m"}]'],
     ['[{"assert": "Email", "strict": true, "mx": false, "message": "m"}, {"assert": "Blank", "message": "m"}]',
      '[{"assert": "Length", "min": 1, "max": 2, "minMessage": "m"}]']),
    # schemas met at one location: each one's property order is kept where they agree (a, b, c;
    # first mention alone would write a, c, b)
    ({"allOf": [{"properties": {"a": {}, "c": {}}}, {"properties": {"b": {}, "c": {}}}]},
     [{"a": 1, "b": 2, "c": 3}], ['{"a": 1, "b": 2, "c": 3}']),
    # member context: a free member takes the schemas the location's context gives it
    ({"type": "object", "allOf": [{"properties": {"a": {"type": "object", "properties": {
        "b": {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "array"}}}}}}}}],
      "not": {"properties": {"a": {"properties": {"b": {"maxItems": 0}}}}}},
     [{"a": {"b": [{"c": [[1]]}]}}, {"a": {"b": []}}, {"a": {"b": [{"c": 1}]}}, {"a": 1}, {}],
     [{"a": {"b": [{"c": [[1]]}]}}]),
    ({"type": "object", "properties": {"x": {"type": "integer"}}, "anyOf": [{"required": ["x"]}, {"required": ["y"]}]},
     [{"x": 1}, {"x": "s"}, {"y": [[1]]}, {"x": 2, "y": {"q": [1]}}, {"z": 1}], [{"x": 1}, {"y": [[1]]}]),
    # free-form depth: deeper near the root (auto), and a complement is never deeper than its operand
    ({"not": {"properties": {"a": {"type": "array", "maxItems": 0}}}},
     [{"a": [[[[1]]]]}, {"a": []}, {"b": [[[[1]]]]}, 1], [{"a": [[[[1]]]]}]),
]


def spellings(c):
    """A candidate and, for an object, every key order of it (nested ones too)."""
    if isinstance(c, str):
        return [c]
    return sorted(set(suite.spellings(c)))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_spellings(case):
    schema, cands, want = CASES[case]
    texts = [t for c in cands for t in spellings(c)]
    wanted = {json.dumps(w, ensure_ascii=False) if not isinstance(w, str) else w for w in want}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(schema, f)
        f.flush()
        # auto depth: case 22 nests constrained values 5 deep under a `not`
        r = subprocess.run([suite.sieve_bin(), "match", "--schema", f.name, "--max-any-depth", "auto"],
                           input="".join(json.dumps(t) + "\n" for t in texts),
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    got = r.stdout.split()
    v = validator(json.loads(json.dumps(schema), parse_float=Decimal))
    for text, g in zip(texts, got):
        valid = v.is_valid(json.loads(text, parse_float=Decimal))
        assert not (g == "1" and not valid), f"invalid {text} accepted by {schema}"
        if text in wanted:
            assert valid, f"test bug: {text} is invalid for {schema}"
            assert g == "1", f"valid {text} rejected by {schema}"


def test_integers_are_sampled_plainly():
    """An integer is written 8, never 8.0, outside differences (strict readers refuse 8.0): the
    samples of integer fields have no fraction, while under a `not` the language keeps 8.0."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "m": {"type": "integer", "minimum": -5,
                                                                                   "maximum": 5}},
              "required": ["n", "m"]}
    r = suite.sieve("sample", schema, "-n", "200", "--seed", "5")
    assert r.returncode == 0, r.stderr
    for line in r.stdout.splitlines():
        doc = json.loads(json.loads(line), parse_float=Decimal)
        assert isinstance(doc["n"], int) and isinstance(doc["m"], int), line
    assert suite.sieve_match({"not": {"type": "integer"}}, ["8.0", "8.5"]) == [False, True]
    assert suite.sieve_match({"type": "integer"}, ["8", "8.0"]) == [True, False]
