r"""Soundness by sampling: for every schema in schemas/ and every test-suite
group that compiles, `sieve sample` output must validate under Python's
`jsonschema` (the schema's own draft, format checking on), with keys in
schema order and in any order (--key-order any). At least 300 schemas take
part.

jsonschema runs `pattern` with Python's `re`, which is not ECMA-262 (no
\p{..}, other \s and \d); the validator here runs patterns with `regress`,
an independent ECMA-262 engine, instead."""
import json
import subprocess
import tempfile
from pathlib import Path

import jsonschema
import pytest
import regress
from decimal import Decimal
from fractions import Fraction

from jsonschema.exceptions import ValidationError

import suite

SCHEMAS = suite.ROOT / "schemas"
N = 20


def sample(schema, n=N, seed=7, args=()):
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(schema, f)
        f.flush()
        r = subprocess.run([suite.sieve_bin(), "sample", "--schema", f.name, "-n", str(n), "--seed", str(seed), *args],
                           capture_output=True, text=True, timeout=120)
    if r.returncode == 2:
        return None  # does not compile: covered by the suite's own checks
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.split("\n")[:-1]]


_rx = {}


def ecma(pattern):
    if pattern not in _rx:
        try:
            _rx[pattern] = regress.Regex(pattern, "u")
        except Exception:
            _rx[pattern] = regress.Regex(pattern)
    return _rx[pattern]


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and ecma(pattern).find(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, pp, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, sub in pp.items():
        for k, v in instance.items():
            if ecma(pattern).find(k) is not None:
                yield from validator.descend(v, sub, path=k, schema_path=pattern)


def _additional_properties(validator, ap, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    props = schema.get("properties", {})
    pats = list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in props and not any(ecma(p).find(k) is not None for p in pats)]
    if validator.is_type(ap, "object"):
        for k in extras:
            yield from validator.descend(instance[k], ap, path=k)
    elif ap is False and extras:
        yield ValidationError(f"additional properties {extras!r}")


def _multiple_of(validator, m, instance, schema):
    if validator.is_type(instance, "number") and (Fraction(str(instance)) / Fraction(str(m))).denominator != 1:
        yield ValidationError(f"{instance} is not a multiple of {m}")


def validator(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    type_checker = cls.TYPE_CHECKER
    if cls not in (jsonschema.Draft3Validator, jsonschema.Draft4Validator):
        # Draft 6+: an integer is any number with a zero fractional part (sieve
        # writes 10.0 and -0.0 for integers, as json.dumps does for floats).
        # jsonschema grants that to floats only, not to the Decimals numbers
        # are read as here.
        type_checker = type_checker.redefine(
            "integer", lambda checker, x: (isinstance(x, int) and not isinstance(x, bool))
            or (isinstance(x, Decimal) and x.is_finite() and x == x.to_integral_value())
            or (isinstance(x, float) and x.is_integer()))
    cls = jsonschema.validators.extend(cls, {"pattern": _pattern, "patternProperties": _pattern_properties,
                                             "additionalProperties": _additional_properties,
                                             "multipleOf": _multiple_of}, type_checker=type_checker)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def collect():
    out = [(f"schemas/{p.name}", json.loads(p.read_text())) for p in sorted(SCHEMAS.glob("*.json"))]
    for f in suite.suite_files():
        rel = f.relative_to(suite.SUITE).as_posix()
        for gi, g in enumerate(json.loads(f.read_text())):
            out.append((f"{rel}#{gi}", g["schema"]))
    return out


@pytest.mark.parametrize("key_order", ["schema", "any"])
def test_samples_validate(key_order):
    checked, texts, bad = 0, 0, []
    for name, schema in collect():
        samples = sample(schema, args=("--key-order", key_order))
        if samples is None:
            continue
        checked += 1
        v = validator(json.loads(json.dumps(schema), parse_float=Decimal))
        for text in samples:
            texts += 1
            try:
                inst = json.loads(text, parse_float=Decimal)
            except ValueError as e:
                bad.append((name, text, f"not JSON: {e}"))
                continue
            errs = list(v.iter_errors(inst))
            if errs:
                bad.append((name, text, errs[0].message[:200]))
    print(f"sampling: {checked} schemas, {texts} samples validated with jsonschema")
    assert not bad, f"{len(bad)} invalid samples, e.g. {bad[:5]}"
    assert checked >= 300, f"only {checked} schemas compiled"


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.json")), ids=lambda p: p.stem)
def test_example_schema_compiles(path):
    r = subprocess.run([suite.sieve_bin(), "compile", "--schema", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
