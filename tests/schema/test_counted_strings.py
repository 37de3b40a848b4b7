"""Counted strings written down directly (fsm/json_quote.c) and big values
as parts beside a union's other alternatives or as array items
(fsm/schema.c sv_sc_big_alts_as_parts, fsm/schema_container.c).

A string with minLength/maxLength and nothing else is built as its minimal
DFA without subset construction; a big one beside `null` (a `type` list,
or Pydantic's Optional as an `anyOf`) or as an array's item is a part of its
own. Checked against Python's jsonschema on strings at and around the
bounds, with escapes and multi-byte code points, other spellings refused,
and on samples; and checked to be a part (the compile reports more
than one) with the same number of states as the flat compile, which has
neither change."""
import json
import random

import jsonschema

from suite import sieve as run, sieve_match as match

CHARS = ["a", "\"", "\\", "\n", "\x01", "\x1f", "\x7f", "/", "é", "€", "\u0800", "\ud7ff", "\ue000", "\U0001f600",
         "\U0010ffff", "u", "0"]


def strings(rng, lengths):
    out = []
    for n in lengths:
        for _ in range(3):
            out.append("".join(rng.choice(CHARS) for _ in range(n)))
    return out


def texts_for(rng, lengths):
    """JSON texts of strings of the given lengths, as json.dumps writes them
    (ensure_ascii=False), and a few other spellings sieve must refuse."""
    good = [json.dumps(s, ensure_ascii=False) for s in strings(rng, lengths)]
    other = ['"\\u0041"', '"\\/"', '"\\u001F"', '"\\u0008"', '"\\ud800"', "null", '"abc', '"a"b"']
    return good + other


def check(schema, texts, *args):
    got = match(schema, texts, *args)
    v = jsonschema.Draft202012Validator(schema)
    for t, g in zip(texts, got):
        try:
            value = json.loads(t)
        except ValueError:
            want = False
        else:
            # sieve accepts json.dumps spellings only (ensure_ascii=False)
            want = not list(v.iter_errors(value)) and json.dumps(value, ensure_ascii=False) == t
        assert g == want, (schema, t, g)


def test_counted_strings_agree_with_jsonschema():
    rng = random.Random(7)
    for mn, mx in [(0, 0), (0, 1), (1, 1), (2, 5), (3, None), (0, None), (7, 7), (0, 40), (30, 40)]:
        schema = {"type": "string"}
        if mn:
            schema["minLength"] = mn
        if mx is not None:
            schema["maxLength"] = mx
        top = (mx if mx is not None else mn + 3) + 2
        check(schema, texts_for(rng, sorted({0, 1, mn, max(mn - 1, 0), mn + 1, top, top - 1, top - 2, top - 3})))


def test_big_string_beside_null_is_a_part():
    rng = random.Random(11)
    lengths = [0, 1, 299, 300, 301]
    for schema in [{"type": ["string", "null"], "maxLength": 300},
                   {"anyOf": [{"type": "string", "maxLength": 300}, {"type": "null"}]},
                   {"type": "object", "properties": {"a": {"type": ["string", "null"], "maxLength": 300},
                                                     "b": {"type": ["null", "string"], "maxLength": 300}},
                    "required": ["a", "b"], "additionalProperties": False}]:
        calls = run("compile", schema)
        flat = run("compile", schema, "--any-calls", "false")
        assert calls.returncode == 0 and flat.returncode == 0, (calls.stdout, flat.stdout)
        c, f = json.loads(calls.stdout), json.loads(flat.stdout)
        assert c["parts"] >= 2, c  # the string is called, not copied into the union
        assert c["states"] < f["states"] + 64, (c, f)
        if "properties" in schema:
            vals = strings(rng, lengths) + [None]
            texts = [json.dumps({"a": rng.choice(vals), "b": rng.choice(vals)}, ensure_ascii=False) for _ in range(40)]
            check(schema, texts + ['{"a": null}', '{"a": null, "b": null, "c": 1}'])
        else:
            check(schema, texts_for(rng, lengths))


def test_two_big_strings_in_one_union_stay_exact():
    # both alternatives start with '"': neither becomes a part on its own
    schema = {"anyOf": [{"type": "string", "maxLength": 300}, {"type": "string", "minLength": 290, "maxLength": 400},
                        {"type": "null"}]}
    rng = random.Random(5)
    check(schema, texts_for(rng, [0, 289, 290, 300, 301, 399, 400, 401]))


def test_big_items_are_parts():
    rng = random.Random(3)
    for schema in [{"type": "array", "items": {"type": "string", "maxLength": 300}},
                   {"type": "array", "minItems": 2, "items": {"type": ["string", "null"], "maxLength": 300}},
                   {"type": "array", "prefixItems": [{"type": "string", "maxLength": 300}], "items": False}]:
        c = json.loads(run("compile", schema).stdout)
        assert c["parts"] >= 2, c
        vals = strings(rng, [0, 5, 300, 301]) + [None, 1]
        texts = ["[]"]
        for _ in range(40):
            texts.append(json.dumps([rng.choice(vals) for _ in range(rng.randrange(0, 5))], ensure_ascii=False))
        check(schema, texts)


def test_counted_samples_are_valid():
    schema = {"type": "object", "properties": {"s": {"type": ["string", "null"], "minLength": 2, "maxLength": 300},
                                               "t": {"type": "array", "items": {"type": "string", "maxLength": 260}}},
              "required": ["s", "t"]}
    r = run("sample", schema, "-n", "25", "--seed", "9", "--max-len", "2000")
    assert r.returncode == 0, r.stderr
    v = jsonschema.Draft202012Validator(schema)
    samples = [json.loads(json.loads(s)) for s in r.stdout.split("\n") if s]
    assert len(samples) == 25
    for s in samples:
        assert not list(v.iter_errors(s)), s
