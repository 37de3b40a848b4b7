"""Parts (fsm/program.c) beyond free-form values: an array item counted by
maxItems becomes a part of its own, so each count costs a call instead of a
copy of the item's automaton. Checked for exactness at the bounds (as many
items as maxItems accepted, one more rejected, a bad item anywhere
rejected), against the flat compilation's size, and for soundness of
samples under jsonschema."""
import json

import jsonschema

import suite
from suite import sieve as run, sieve_match as match

ITEM = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"type": "string", "maxLength": 4},
                                         "c": {"enum": ["x", "y", "z"]}},
        "required": ["a"], "additionalProperties": False}


def test_counted_items_are_calls():
    schema = {"type": "array", "minItems": 2, "maxItems": 300, "items": ITEM}
    calls = run("compile", schema, "--any-calls", "true")
    flat = run("compile", schema, "--any-calls", "false")
    assert calls.returncode == 0, calls.stdout
    n_calls = json.loads(calls.stdout)["states"]
    # flat: a copy of the item per count, or over a budget
    if flat.returncode == 0:
        assert n_calls * 4 < json.loads(flat.stdout)["states"], (n_calls, flat.stdout)
    item = {"a": 1, "b": "ab", "c": "y"}
    texts = [json.dumps([item] * k) for k in (1, 2, 3, 150, 299, 300, 301)]
    bad = [dict(item, a=-1), dict(item, b="toolong"), dict(item, d=1), {"b": "x"}]
    for pos in (0, 1, 250, 299):
        for b in bad:
            arr = [item] * 300
            arr[pos] = b
            texts.append(json.dumps(arr))
    got = match(schema, texts, "--any-calls", "true")
    assert got[:7] == [False, True, True, True, True, True, False]
    assert not any(got[7:])


def test_counted_item_samples_are_valid():
    schema = {"type": "array", "maxItems": 40, "items": ITEM}
    r = run("sample", schema, "--any-calls", "true", "-n", "30", "--seed", "3", "--max-len", "400")
    assert r.returncode == 0, r.stderr
    v = jsonschema.Draft202012Validator(schema)
    lines = r.stdout.split("\n")
    samples = [json.loads(json.loads(s)) for s in lines if s]
    assert len(samples) == 30
    for s in samples:
        assert not list(v.iter_errors(s)), s


# Recursive schemas: a $ref target becomes a part that calls itself.
TREE = {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                           "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                           "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/node"}
LIST = {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "string", "maxLength": 3},
                                                           "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                           "required": ["v", "next"], "additionalProperties": False}}, "$ref": "#/$defs/node"}
JSON = {"$defs": {"j": {"anyOf": [{"type": "null"}, {"type": "boolean"}, {"type": "number"}, {"type": "string"},
                                  {"type": "array", "items": {"$ref": "#/$defs/j"}},
                                  {"type": "object", "additionalProperties": {"$ref": "#/$defs/j"}}]}},
        "$ref": "#/$defs/j"}


def tree(d):
    return {"v": d} if d == 0 else {"v": d, "kids": [{"v": -1}, tree(d - 1)]}


def linked(d):
    return {"v": "a", "next": None} if d == 0 else {"v": "b", "next": linked(d - 1)}


def nested_json(d):
    return 1 if d == 0 else ([nested_json(d - 1), "s"] if d % 2 else {"k": nested_json(d - 1), "n": None})


def breakages(text, schema):
    """Texts broken at every depth: each closing bracket swapped or dropped,
    and for typed schemas a wrong-typed leaf at each depth."""
    closers = [i for i, ch in enumerate(text) if ch in "]}"]
    out = [text[:i] + ("]" if text[i] == "}" else "}") + text[i + 1:] for i in closers]
    out += [text[:i] + text[i + 1:] for i in closers]
    return out


def test_recursive_schemas_any_depth():
    v = jsonschema.Draft202012Validator
    for schema, make, bad_leaf in ((TREE, tree, ('"v": -1', '"v": "x"')), (LIST, linked, ('"v": "b"', '"v": "long"')),
                                   (JSON, nested_json, None)):
        c = run("compile", schema)
        assert c.returncode == 0, c.stdout
        assert json.loads(c.stdout)["recursion_truncated"] is False
        text = json.dumps(make(50))
        assert v(schema).is_valid(json.loads(text))
        bad = breakages(text, schema)
        if bad_leaf:  # an invalid leaf at each depth
            parts = text.split(bad_leaf[0])
            for i in range(1, len(parts)):
                t = bad_leaf[0].join(parts[:i]) + bad_leaf[1] + bad_leaf[0].join(parts[i:])
                assert not v(schema).is_valid(json.loads(t))
                bad.append(t)
        got = match(schema, [text] + bad)
        assert got[0], "depth 50 rejected"
        assert not any(got[1:]), [b for b, g in zip(bad, got[1:]) if g][:2]
        # flat: the old bounded expansion rejects depth 50
        assert match(schema, [text], "--any-calls", "false") == [False]


def test_recursive_samples_are_valid():
    for schema in (TREE, LIST, JSON):
        r = run("sample", schema, "-n", "40", "--seed", "9", "--max-len", "300")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.split("\n")[:-1]
        assert len(lines) == 40
        v = jsonschema.Draft202012Validator(schema)
        for s in lines:
            x = json.loads(json.loads(s))
            assert v.is_valid(x), x


def test_five_thousand_properties():
    """A generated object of 5,000 properties compiles within the default
    budgets (its values are parts, equal ones shared) and is exact at a
    few probes."""
    kinds = [{"type": "integer"}, {"type": "string", "maxLength": 8}, {"enum": ["a", "b"]}, {"type": "boolean"},
             {"type": "array", "items": {"type": "number"}}]
    n = 5000
    props = {f"p{i}": kinds[i % 5] for i in range(n)}
    req = [f"p{i}" for i in range(0, n, 7)]
    schema = {"type": "object", "properties": props, "required": req, "additionalProperties": False}
    c = run("compile", schema)
    assert c.returncode == 0, c.stdout
    sample = {"p0": 1, "p3": True, "p6": "ab"}
    for i in range(0, n, 7):
        sample.setdefault(f"p{i}", [1, "s", "a", False, [0.5]][i % 5])
    good = json.dumps({k: sample[k] for k in props if k in sample})
    missing = json.dumps({k: sample[k] for k in props if k in sample and k != "p4998"})
    bad_type = good.replace('"p1": "s"', '"p1": 5') if '"p1": "s"' in good else good.replace('"p0": 1', '"p0": "x"')
    v = jsonschema.Draft202012Validator(schema)
    assert v.is_valid(json.loads(good)) and not v.is_valid(json.loads(missing)) and not v.is_valid(json.loads(bad_type))
    assert match(schema, [good, missing, bad_type]) == [True, False, False]


def test_context_recursion_is_bounded():
    """A $ref whose target reaches itself through member contexts (no $ref on
    the way) once recursed until the stack ran out: now a clean result or a
    budget error, never a crash."""
    schema = {"type": "object", "properties": {
        "a": {}, "b": {"type": "object", "additionalProperties": True},
        "c": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}},
        "$defs": {"n": {"type": "object", "properties": {
            "x": {"$ref": "#/$defs/n", "dependentRequired": {"type": "object", "additionalProperties": True}},
            "y": {"allOf": [{}, {"if": {"$schema": "http://json-scXema.org/draft-07/schema#"}}]}}}}}
    for calls in ("true", "false"):
        r = run("compile", schema, "--any-calls", calls, "--compile-timeout-ms", "2000")
        assert r.returncode in (0, 2), (r.returncode, r.stderr[-500:])
        if r.returncode == 2:
            assert json.loads(r.stdout)["error"]["type"] in ("timeout", "budget"), r.stdout


def test_ref_beside_ignored_keywords_is_a_call():
    """A $ref whose siblings are annotations or keywords sieve ignores
    (an editor's "x-intellij-html-description", as JSON Schema Store's
    Skaffold schema writes beside each $ref) constrains nothing more than the
    $ref alone (fsm/schema.c sv_sc_ref_alone): it is a call, so a recursive
    target nests to any depth, where it used to be a product cut at
    max_ref_depth."""
    node = {"type": "object", "properties": {"name": {"type": "string"},
                                             "kids": {"type": "array", "items": {
                                                 "$ref": "#/$defs/node", "x-intellij-html-description": "a child"}}},
            "required": ["name"]}
    schema = {"$defs": {"node": node}, "$ref": "#/$defs/node", "x-note": "the root"}
    stats = suite.compile_stats(schema)
    assert not stats["recursion_truncated"], stats
    assert "x-intellij-html-description" in stats["ignored_keywords"]
    texts = []
    for depth in (1, 5, 20, 50):
        v = {"name": "leaf"}
        for i in range(depth):
            v = {"name": f"n{i}", "kids": [v, {"name": "x"}]}
        texts.append(json.dumps(v))
        broken = json.loads(texts[-1])
        inner = broken
        for _ in range(depth - 1):
            inner = inner["kids"][0]
        inner["kids"][1] = {"name": 7}  # a bad name at the deepest level
        texts.append(json.dumps(broken))
    suite.assert_agrees(schema, texts)
    # beside a keyword that does constrain, the $ref is still met with it
    capped = dict(schema, maxProperties=1)
    assert match(capped, ['{"name": "a"}', '{"name": "a", "kids": []}']) == [True, False]


def test_ref_beside_the_type_it_implies_is_its_target():
    """{"$ref": X, "type": "object"} where X says "type": "object" is X (in
    2019+ the sibling is one more conjunct, but one X implies): no product,
    so X keeps its parts and recursion to any depth (MaskBench's
    Github_easy---o83258, a recursive React element, was a flat product of
    7,809 states with its recursion cut; --key-order any then kept its
    objects in schema order). A sibling type the target does not imply
    still meets it."""
    node = {"type": "object", "additionalProperties": False, "required": ["type"],
            "properties": {"type": {"type": "string"}, "props": {"type": "object"},
                           "children": {"oneOf": [{"type": "string"}, {"$ref": "#/definitions/el"},
                                                  {"type": "array", "items": {"$ref": "#/definitions/el"}}]}}}
    schema = {"$ref": "#/definitions/el", "type": "object", "title": "element", "definitions": {"el": node}}
    for extra in ([], ["--key-order", "any"]):
        st = json.loads(run("compile", schema, *extra).stdout)
        assert not st["recursion_truncated"] and st["states"] < 1000, st
    def nest(flip):
        d = {"type": "p", "children": "x"}
        for i in range(60):
            kids = [d, {"type": "b"}] if i % 2 else d
            d = {"children": kids, "type": "d%d" % i} if i == flip else {"type": "d%d" % i, "children": kids}
        return d
    deep = nest(-1)
    bad = json.loads(json.dumps(deep))
    cur = bad
    for _ in range(40):
        cur = cur["children"] if isinstance(cur["children"], dict) else cur["children"][0]
    cur["children"] = 7  # not a string, an element or a list of them
    texts = [json.dumps(deep), json.dumps(bad), json.dumps({"props": {}}), json.dumps([deep]), json.dumps({"type": "a"})]
    want = [suite.oracle(schema, t) for t in texts]
    assert want == [True, False, False, False, True]
    assert match(schema, texts) == want
    assert match(schema, texts, "--key-order", "any") == want
    flipped = json.dumps(nest(7))  # children before type, 52 levels down
    assert suite.oracle(schema, flipped)
    assert match(schema, [flipped], "--key-order", "any") == [True]
    # a sibling type that narrows the target's is a conjunct
    narrowed = {"$ref": "#/definitions/el", "type": "string", "definitions": {"el": {"type": ["object", "string"]}}}
    assert match(narrowed, ['"s"', "{}", "1"]) == [True, False, False]
