"""`sieve generate` on the default model (SmolLM2-135M-Instruct, Q4_1 GGUF).

- A greedy chat answer to a fixed question names the expected thing.
- With --schema, sampled at temperature 1.0, the output is JSON that Python's
  jsonschema accepts, for 24 schemas (types, bounds, enums, patterns,
  formats, nesting, arrays, anyOf/oneOf, nullable, additionalProperties).
- With a tight --max-tokens, the output is still complete and valid, and
  uses no more tokens than allowed; a budget below the schema's minimum is
  refused up front.
- With --regex, the output matches the pattern (Python's re).
- Bad constraints and flags are errors, not crashes.

Needs SIEVE_BIN (the sieve binary) and the model that scripts/fetch-model.sh
installs; both missing is a failure, not a skip.
"""
import json
import os
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def sieve():
    b = os.environ.get("SIEVE_BIN")
    assert b and os.access(b, os.X_OK), "SIEVE_BIN must name the sieve binary"
    assert MODEL.is_file(), f"{MODEL} is missing: scripts/fetch-model.sh fetches it"
    return b


def generate(*args, check=True, timeout=300):
    r = subprocess.run([sieve(), "generate", "-m", str(MODEL), "--threads", "2", *args],
                       capture_output=True, timeout=timeout)
    if check:
        assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r


def test_chat_greedy_answer():
    # The fp32 kernels: with 8-bit activations (the default, --cpu-kernels int8) this 135M model
    # answers "L'Étoile, la Cité, ...", as llama.cpp does on the same file (BENCHMARKS.md).
    r = generate("--chat", "-p", "What is the capital of France?", "--temperature", "0", "--max-tokens", "40",
                 "--cpu-kernels", "ref")
    out = r.stdout.decode()
    assert "Paris" in out, out
    assert b"finish stop" in r.stderr


def test_greedy_is_reproducible_and_ids_agree_with_text():
    a = generate("-p", "Once upon a time", "--temperature", "0", "--max-tokens", "16", "--print-ids")
    b = generate("-p", "Once upon a time", "--temperature", "0", "--max-tokens", "16", "--print-ids")
    assert a.stdout == b.stdout
    ids = [int(x) for x in a.stdout.decode().strip().split(",")]
    assert len(ids) == 16


def test_seeded_sampling_is_reproducible():
    args = ("-p", "My favourite colour is", "--temperature", "1", "--seed", "42", "--max-tokens", "12")
    assert generate(*args).stdout == generate(*args).stdout


SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
     "required": ["name", "age"]},
    {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24},
                                      "population": {"type": "integer", "minimum": 0, "maximum": 50000000}},
     "required": ["city", "population"], "additionalProperties": False},
    {"type": "object", "properties": {"answer": {"enum": ["yes", "no", "maybe"]}}, "required": ["answer"]},
    {"type": "object", "properties": {"score": {"type": "number", "minimum": 0, "maximum": 10}},
     "required": ["score"], "additionalProperties": False},
    {"type": "object", "properties": {"ok": {"type": "boolean"}, "note": {"type": ["string", "null"]}},
     "required": ["ok", "note"]},
    {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 9}, "minItems": 2, "maxItems": 5},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 12},
                                               "maxItems": 4}}, "required": ["tags"], "additionalProperties": False},
    {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["zip"],
     "additionalProperties": False},
    {"type": "object", "properties": {"date": {"type": "string", "format": "date"}}, "required": ["date"],
     "additionalProperties": False},
    {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}, "required": ["email"],
     "additionalProperties": False},
    {"type": "object", "properties": {"kind": {"const": "point"}, "x": {"type": "integer"}, "y": {"type": "integer"}},
     "required": ["kind", "x", "y"], "additionalProperties": False},
    {"type": "object", "properties": {"user": {"type": "object", "properties": {
        "id": {"type": "integer", "minimum": 1}, "name": {"type": "string", "minLength": 1, "maxLength": 16}},
        "required": ["id", "name"], "additionalProperties": False}}, "required": ["user"],
     "additionalProperties": False},
    {"anyOf": [{"type": "integer", "minimum": 100}, {"type": "string", "maxLength": 5}]},
    {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
                "additionalProperties": False},
               {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"],
                "additionalProperties": False}]},
    {"type": "object", "properties": {"items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
        "type": "object", "properties": {"sku": {"type": "string", "maxLength": 8},
                                         "qty": {"type": "integer", "minimum": 1, "maximum": 99}},
        "required": ["sku", "qty"], "additionalProperties": False}}}, "required": ["items"],
     "additionalProperties": False},
    {"type": "string", "enum": ["red", "green", "blue"]},
    {"type": "integer", "minimum": -50, "maximum": 50},
    {"type": "object", "properties": {"level": {"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 100}},
     "required": ["level"], "additionalProperties": False},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}, "required": ["id"],
     "additionalProperties": False},
    {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40},
                                      "done": {"type": "boolean"},
                                      "priority": {"enum": [1, 2, 3]}},
     "required": ["title", "done", "priority"], "additionalProperties": False},
    {"type": "object", "properties": {"coords": {"type": "array", "prefixItems": [{"type": "number"},
                                                                                  {"type": "number"}],
                                                 "items": False}},
     "required": ["coords"], "additionalProperties": False},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}},
     "required": ["name"], "minProperties": 1, "maxProperties": 2},
    {"$defs": {"pet": {"type": "object", "properties": {"species": {"enum": ["cat", "dog"]},
                                                       "age": {"type": "integer", "minimum": 0, "maximum": 30}},
                       "required": ["species", "age"], "additionalProperties": False}},
     "type": "object", "properties": {"pets": {"type": "array", "items": {"$ref": "#/$defs/pet"}, "maxItems": 3}},
     "required": ["pets"], "additionalProperties": False},
    {"type": "object", "properties": {"url": {"type": "string", "format": "uri", "maxLength": 60}},
     "required": ["url"], "additionalProperties": False},
]


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_schema_output_is_valid_at_temperature_1(i, tmp_path):
    schema = SCHEMAS[i]
    f = tmp_path / "schema.json"
    f.write_text(json.dumps(schema))
    r = generate("--chat", "-p", "Reply with JSON for this schema: " + json.dumps(schema),
                 "--schema", str(f), "--temperature", "1", "--seed", str(1000 + i), "--max-tokens", "160")
    text = r.stdout.decode()
    assert text.endswith("\n")
    value = json.loads(text[:-1])
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(value)
    assert b"finish stop" in r.stderr


def test_tight_budget_still_completes(tmp_path):
    schema = SCHEMAS[1]
    f = tmp_path / "schema.json"
    f.write_text(json.dumps(schema))
    small = generate("--chat", "-p", "A city as JSON.", "--schema", str(f), "--max-tokens", "1", check=False)
    assert small.returncode != 0 and b"needs at least" in small.stderr, small.stderr
    need = int(re.search(rb"needs at least (\d+) tokens", small.stderr).group(1))
    for budget in (need, need + 3):
        for seed in (1, 2):
            r = generate("--chat", "-p", "A city as JSON.", "--schema", str(f), "--temperature", "1",
                         "--seed", str(seed), "--max-tokens", str(budget), "--print-ids")
            ids = r.stdout.decode().strip().split(",")
            assert len(ids) <= budget
            t = generate("--chat", "-p", "A city as JSON.", "--schema", str(f), "--temperature", "1",
                         "--seed", str(seed), "--max-tokens", str(budget))
            jsonschema.validate(json.loads(t.stdout.decode()), schema)


@pytest.mark.parametrize("pattern", [r" (19|20)[0-9]{2}", r"[A-Z][a-z]+, [A-Z][a-z]+", r"(yes|no)\."])
def test_regex_output_matches(pattern):
    r = generate("-p", "Answer:", "--regex", pattern, "--temperature", "1", "--seed", "7", "--max-tokens", "30")
    out = r.stdout.decode()[:-1]
    assert re.fullmatch(pattern, out), out


def test_errors_are_clean(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "object", "properties": {"a": {"type": "strin"}}}')
    r = generate("-p", "x", "--schema", str(bad), check=False)
    assert r.returncode == 2 and b"error" in r.stdout
    r = generate("-p", "x", "--temperature", "3", check=False)
    assert r.returncode != 0 and b"temperature" in r.stderr
    r = generate("-p", "x", "--prompt-ids", "1,2", check=False)
    assert r.returncode == 64
    r = generate("-p", "x", "--cpu-kernels", "int4", check=False)
    assert r.returncode == 64 and b"--cpu-kernels" in r.stderr
    r = subprocess.run([sieve(), "generate", "-m", str(tmp_path / "none.gguf"), "-p", "x"], capture_output=True)
    assert r.returncode == 1 and r.stderr
