"""OpenAPI's discriminator on a oneOf (Pydantic's discriminated unions).

By default (`--discriminator required`) each branch that defines the
discriminator's propertyName requires it, as OpenAPI asks and as Pydantic
validates: a narrowing of JSON Schema, which ignores the keyword, counted in
`discriminator_required`. With `--discriminator annotation` the keyword is
ignored and oneOf is exact. Checked against Python's jsonschema:

- every instance sieve accepts, in either mode, is valid;
- with the tag, the default accepts exactly what jsonschema accepts;
- without the tag, the default refuses, `annotation` agrees with jsonschema;
- samples of both modes validate, and the default's all carry the tag;
- a union changes whole or not at all (narrowing some branches alone would
  let a value valid in two branches pass as valid in one): one with a model
  also used elsewhere stays exact; documents with a nested $id are left
  alone.
"""
import copy
import json

import jsonschema

import subprocess
from decimal import Decimal
from pathlib import Path

from suite import compile_stats as stats, oracle, sieve as run, sieve_bin, sieve_match as match
from test_sampling import validator as exact_validator


def model(tag, fields, required):
    """A Pydantic model's schema: the tag a const with a default, not required."""
    props = {"kind": {"const": tag, "default": tag, "type": "string"}}
    props.update(fields)
    return {"type": "object", "properties": props, "required": required, "title": tag}


UNION = {
    "$defs": {
        "Circle": model("circle", {"r": {"type": "integer", "minimum": 0}}, ["r"]),
        "Square": model("square", {"side": {"type": "integer"}, "r": {"type": "integer"}}, ["side"]),
        "Label": model("label", {"text": {"type": "string", "maxLength": 8}}, []),
    },
    "type": "object",
    "properties": {
        "shape": {
            "discriminator": {"propertyName": "kind", "mapping": {
                "circle": "#/$defs/Circle", "square": "#/$defs/Square", "label": "#/$defs/Label"}},
            "oneOf": [{"$ref": "#/$defs/Circle"}, {"$ref": "#/$defs/Square"}, {"$ref": "#/$defs/Label"}],
        }
    },
    "required": ["shape"],
}

WITH_TAG = [
    {"shape": {"kind": "circle", "r": 2}},
    {"shape": {"kind": "square", "side": 3}},
    {"shape": {"kind": "square", "side": 3, "r": 1}},
    {"shape": {"kind": "label", "text": "hi"}},
    {"shape": {"kind": "label"}},
    {"shape": {"kind": "circle"}},           # r missing
    {"shape": {"kind": "circle", "r": -1}},  # r below its minimum
    {"shape": {"kind": "label", "text": "much too long"}},
    {"shape": {"kind": "oval", "r": 2}},     # no such tag
]

WITHOUT_TAG = [
    {"shape": {"r": 2}},             # Circle and Label: two branches, invalid
    {"shape": {"side": 3}},          # Square and Label: invalid
    {"shape": {"text": "hi"}},       # Label only: valid in JSON Schema
    {"shape": {}},                   # Label only: valid in JSON Schema
]


def texts(instances):
    """Instances as json.dumps writes them, in the schema's key order (the
    order sieve's default accepts)."""
    return [json.dumps(i) for i in instances]


def test_counts_and_modes():
    assert stats(UNION)["discriminator_required"] == 3
    assert stats(UNION, "--discriminator", "annotation")["discriminator_required"] == 0


def test_with_the_tag():
    """The default agrees with jsonschema on tagged values; annotation (the
    exact oneOf, a difference per branch) accepts only valid ones."""
    ts = texts(WITH_TAG)
    assert match(UNION, ts) == [oracle(UNION, t) for t in ts]
    assert any(oracle(UNION, t) for t in ts) and not all(oracle(UNION, t) for t in ts)
    for t, g in zip(ts, match(UNION, ts, "--discriminator", "annotation")):
        assert not g or oracle(UNION, t), t


def test_without_the_tag():
    ts = texts(WITHOUT_TAG)
    assert match(UNION, ts) == [False] * len(ts)  # the narrowing
    got = match(UNION, ts, "--discriminator", "annotation")
    assert got == [oracle(UNION, t) for t in ts]
    assert got == [False, False, True, True]  # the exact oneOf, told apart by the branches' keys


def test_samples_validate_and_carry_the_tag():
    for args in ((), ("--discriminator", "annotation")):
        r = run("sample", UNION, "-n", "40", "--seed", "7", *args)
        assert r.returncode == 0, r.stdout + r.stderr
        lines = [json.loads(json.loads(l)) for l in r.stdout.splitlines() if l.strip()]
        assert len(lines) == 40
        for v in lines:
            jsonschema.validate(v, UNION)
            if not args:
                assert "kind" in v["shape"], v


def test_a_model_used_elsewhere_keeps_the_union_exact():
    """Narrowing some branches alone would be unsound (a value valid in two
    branches would pass as valid in one), so a union with a branch that is
    also used elsewhere is left exact."""
    s = copy.deepcopy(UNION)
    s["properties"]["solo"] = {"$ref": "#/$defs/Circle"}
    assert stats(s)["discriminator_required"] == 0
    ts = [json.dumps({"shape": v["shape"], "solo": {"r": 1}}) for v in WITH_TAG + WITHOUT_TAG]
    for t, g in zip(ts, match(s, ts)):
        assert not g or oracle(s, t), t
    two = json.dumps({"shape": {"r": 1}, "solo": {"r": 1}})  # Circle and Label
    assert not oracle(s, two) and match(s, [two]) == [False]


def test_inline_branches_and_nested_ids():
    s = {"discriminator": {"propertyName": "kind"},
         "oneOf": [model("a", {"x": {"type": "integer"}}, ["x"]), model("b", {"y": {"type": "integer"}}, ["y"])]}
    assert stats(s)["discriminator_required"] == 2
    t = json.dumps({"x": 1})
    assert oracle(s, t) and match(s, [t]) == [False]
    assert match(s, [t], "--discriminator", "annotation") == [True]
    # a branch that is the root itself (the document's schema) is not changed
    leaf = model("leaf", {"v": {"type": "integer"}}, ["v"])
    leaf["additionalProperties"] = False
    rec = {"type": "object", "additionalProperties": False, "required": ["next"],
           "properties": {"kind": {"const": "node", "default": "node"}, "next": {
               "discriminator": {"propertyName": "kind"}, "oneOf": [{"$ref": "#"}, leaf]}}}
    assert stats(rec)["discriminator_required"] == 0
    t = json.dumps({"next": {"next": {"v": 1}}})  # no tags anywhere: valid, and accepted
    assert oracle(rec, t) and match(rec, [t]) == [True]
    nested_id = copy.deepcopy(UNION)
    nested_id["$defs"]["Circle"]["$id"] = "https://example.com/circle"
    assert stats(nested_id)["discriminator_required"] == 0


def test_tools_with_a_discriminated_union():
    """The dynamodb MCP server's tools (tests/data/toolsets): a oneOf of 10
    tagged access patterns whose tag has a default. By default every branch
    requires the tag (a union, no difference); sampled calls validate
    against the tools' parameters in both modes."""
    path = Path(__file__).resolve().parents[1] / "data" / "toolsets" / "pypi-awslabs-dynamodb-mcp-server" / "tools.json"
    tools = {t["function"]["name"]: json.loads(json.dumps(t["function"]["parameters"]), parse_float=Decimal)
             for t in json.loads(path.read_text())}
    for args, want in (((), 10), (("--discriminator", "annotation"), 0)):
        base = [sieve_bin(), "--tools", str(path), "--tool-choice", "required", *args]
        r = subprocess.run([base[0], "compile", *base[1:]], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout)["discriminator_required"] == want
        r = subprocess.run([base[0], "sample", *base[1:], "-n", "20", "--seed", "3", "--max-len", "400"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        for line in r.stdout.splitlines():
            # numbers read exactly (a float would round 2.08e22 + 0.07 to an integer)
            for call in json.loads(json.loads(line), parse_float=Decimal):
                errors = list(exact_validator(tools[call["name"]]).iter_errors(call["arguments"]))
                assert not errors, (call, errors[0].message)


def test_the_default_agrees_with_pydantic():
    """Pydantic itself, the writer of these unions and the validator behind
    most tools that use them: its schema for a discriminated union, and its
    verdict on each value, against sieve's default (where jsonschema, which
    ignores the keyword, also accepts the tagless value valid in one
    branch)."""
    from typing import Literal, Union

    import pydantic
    from pydantic import BaseModel, Field

    class Circle(BaseModel):
        kind: Literal["circle"] = "circle"
        r: int

    class Square(BaseModel):
        kind: Literal["square"] = "square"
        side: int

    class Label(BaseModel):
        kind: Literal["label"] = "label"
        text: str = ""

    class Drawing(BaseModel):
        shape: Union[Circle, Square, Label] = Field(discriminator="kind")

    schema = Drawing.model_json_schema()
    assert stats(schema)["discriminator_required"] == 3
    values = [{"shape": s} for s in (
        {"kind": "circle", "r": 2}, {"kind": "square", "side": 1}, {"kind": "label", "text": "hi"},
        {"kind": "label"}, {"kind": "circle"}, {"kind": "oval", "r": 1},
        {"r": 2}, {"side": 1}, {"text": "hi"}, {})]

    def pydantic_ok(v):
        try:
            Drawing.model_validate(v)
            return True
        except pydantic.ValidationError:
            return False

    ts = texts(values)
    got = match(schema, ts)
    assert got == [pydantic_ok(v) for v in values], list(zip(ts, got))
    assert oracle(schema, json.dumps({"shape": {"text": "hi"}}))  # JSON Schema alone would accept it
