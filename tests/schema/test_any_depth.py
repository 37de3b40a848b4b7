"""Free-form values and their nesting (schema.h: any_calls, max_any_depth,
any_deep_levels, any_deep_arrays). With --any-calls true a free-form value
nests to any depth: every stack up to 8 levels (and 60, in the call test) is
accepted. The bounded shape is what free-form values take with
--any-calls false (and inside products when a call there cannot be kept,
fsm/program_product.c): every stack of containers up to
--max-any-depth levels is accepted; deeper ones, up to --any-deep-levels more,
only while they hold at most --any-deep-arrays arrays. The test enumerates
every stack of objects and arrays up to 8 levels, builds a value with that
stack (Python's json.dumps spells it), and checks sieve's verdict against the
rule and, for soundness, against jsonschema. Broken texts (a bracket closed by
the wrong kind, a missing close) must be rejected at every depth."""
import itertools
import json
import subprocess
import tempfile

import pytest

import suite
from test_sampling import validator


def nest(stack):
    """A value whose containers, outermost first, are `stack` ('o' or 'a')."""
    v = 7
    for kind in reversed(stack):
        v = {"k": v, "n": None} if kind == "o" else [v, "s"]
    return v


def stacks(max_len):
    for n in range(max_len + 1):
        yield from ("".join(p) for p in itertools.product("oa", repeat=n))


def expected(stack, general, extra, arrays):
    return len(stack) <= general or (len(stack) <= general + extra and stack.count("a") <= arrays)


def match(schema, texts, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(schema, f)
        f.flush()
        r = subprocess.run([suite.sieve_bin(), "match", "--schema", f.name, *args],
                           input="".join(json.dumps(t) + "\n" for t in texts),
                           capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    got = r.stdout.split()
    assert len(got) == len(texts)
    return [g == "1" for g in got]


# (flags, general depth, deep levels, arrays in a deep stack)
FLAT = ["--any-calls", "false"]
CALLS = ["--any-calls", "true"]
SHAPES = [
    (FLAT, 3, 3, 1),                                           # the defaults
    (FLAT + ["--any-deep-levels", "0"], 3, 0, 0),              # the old fixed depth
    (FLAT + ["--any-deep-arrays", "0"], 3, 3, 0),              # deep objects only
    (FLAT + ["--max-any-depth", "2", "--any-deep-arrays", "2"], 2, 3, 2),
    (FLAT + ["--max-any-depth", "1", "--any-deep-levels", "5"], 1, 5, 1),
    (["--any-calls", "true"], 99, 0, 0),                       # calls: any depth
]


def test_calls_any_depth():
    """With calls, 60 levels of any mix of containers, at the root and under a
    property, and broken at every depth."""
    import random
    rnd = random.Random(5)
    for _ in range(20):
        stack = "".join(rnd.choice("oa") for _ in range(60))
        text = json.dumps(nest(stack))
        assert match({}, [text], *CALLS) == [True], stack
        assert match({"type": "object", "properties": {"p": {}}}, [json.dumps({"p": nest(stack)})], *CALLS) == [True]
        closers = [i for i, ch in enumerate(text) if ch in "]}"]
        bad = [text[:i] + ("]" if text[i] == "}" else "}") + text[i + 1:] for i in closers]
        bad += [text[:i] + text[i + 1:] for i in closers]
        assert not any(match({}, bad, *CALLS)), stack


@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_free_form_nesting(shape):
    flags, general, extra, arrays = SHAPES[shape]
    all_stacks = list(stacks(8))
    texts = [json.dumps(nest(s)) for s in all_stacks]
    # the same values under a property: the free-form value starts one level down
    wrapped = [json.dumps({"p": nest(s)}) for s in all_stacks]
    got = match({}, texts, *flags)
    got_wrapped = match({"type": "object", "properties": {"p": {}}}, wrapped, *flags)
    for s, g, gw in zip(all_stacks, got, got_wrapped):
        want = expected(s, general, extra, arrays)
        assert g == want, f"stack {s or '(none)'}: sieve says {g}, the rule {want} ({flags})"
        assert gw == want, f"stack {s or '(none)'} under a property: sieve says {gw}, the rule {want} ({flags})"


def test_broken_brackets_rejected():
    bad = []
    for s in stacks(7):
        if not s:
            continue
        text = json.dumps(nest(s))
        closes = [i for i, ch in enumerate(text) if ch in "]}"]
        for i in closes:  # each close swapped for the other kind
            bad.append(text[:i] + ("}" if text[i] == "]" else "]") + text[i + 1:])
        bad.append(text[:closes[-1]])  # the outermost close missing
    for flags in ([], CALLS, FLAT + ["--any-deep-arrays", "4"], FLAT + ["--max-any-depth", "auto"]):
        got = match({}, bad, *flags)
        accepted = [t for t, g in zip(bad, got) if g]
        assert not accepted, f"broken JSON accepted with {flags}: {accepted[:3]}"


# Deep free-form values inside the boolean keywords: each branch's deep
# values must not let through what another branch or the `not` excludes.
COMBINED = [
    {"not": {"type": "object", "properties": {"a": {"type": "object"}}, "required": ["a"]}},
    {"oneOf": [{"type": "object"}, {"type": "object", "properties": {"a": {"required": ["x"]}}}]},
    {"oneOf": [{}, {"type": "object", "required": ["a"]}]},
    {"if": {"properties": {"a": {"type": "object"}}}, "then": {"required": ["b"]}, "else": {"maxProperties": 1}},
    {"type": "array", "contains": {"type": "object", "required": ["a"]}, "maxContains": 1},
]


@pytest.mark.parametrize("case", range(len(COMBINED)))
def test_deep_values_under_boolean_keywords(case):
    schema = COMBINED[case]
    cands = []
    for s in stacks(6):
        v = nest(s)
        cands += [v, {"a": v}, {"a": v, "b": 1}, {"a": {"x": v}}, [v], [{"a": v}, {"a": v}], [{"a": v}, 1]]
    texts = sorted({json.dumps(c) for c in cands})
    got = match(schema, texts)
    v = validator(schema)
    wrong = [t for t, g in zip(texts, got) if g and not v.is_valid(json.loads(t))]
    assert not wrong, f"{schema} accepts invalid {wrong[:3]}"
    assert any(got), f"{schema} accepts none of the candidates"
