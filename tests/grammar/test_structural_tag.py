"""Structural tags (fsm/structural_tag.c, docs/structural_tag.md)
through `sieve compile|match|sample --structural-tag FILE`.

Every verdict is checked against stag_oracle.Oracle, a second reading of
the documented rules in Python (json.loads + jsonschema + json.dumps for
JSON contents, re.fullmatch for regexes): the hand-written strings that
must be accepted or rejected, sieve's samples, and near misses of both
(characters deleted, inserted, swapped). Token masks around triggers split
across tokens are checked against brute force in tests/unit/test_structural_tag.c."""
import json
import os
import random
import re
import subprocess
import tempfile

import jsonschema
import pytest

from gbnf_harness import dedupe, mutations, sieve_bin
from stag_oracle import Oracle

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "days"], "additionalProperties": False}
SEARCH = {"type": "object", "properties": {"q": {"type": "string", "enum": ["cats", "dogs", "a<b"]}},
          "required": ["q"], "additionalProperties": False}


def call(name, schema):
    """A Qwen-style tool call tag."""
    return {"begin": '<tool_call>{"name": "%s", "arguments": ' % name,
            "content": {"type": "json_schema", "json_schema": schema}, "end": "}</tool_call>"}


def qwen(**kw):
    return {"type": "structural_tag", "format": dict(
        {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [call("weather", WEATHER), call("search", SEARCH)]},
        **kw)}


def tc(name, args):
    return '<tool_call>{"name": "%s", "arguments": %s}</tool_call>' % (name, json.dumps(args, ensure_ascii=False))


W1 = tc("weather", {"city": "Paris", "days": 3})
S1 = tc("search", {"q": "dogs"})

THINK_THEN_CALLS = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
    {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
    {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [call("weather", WEATHER)]}]}}

# name -> (structural tag, strings it accepts, strings it rejects)
CASES = {
    # a tool call in the middle of free text, several calls, text between and after
    "qwen": (qwen(), ["", "hello", "Let me check. " + W1 + " Done.", W1, W1 + S1, "a" + W1 + "b" + S1 + "c\n",
                      "<tool_cal", "<tool_call", "text with < and > and </tool_call>"],
             ["x<tool_call>", "x<tool_call>{}", "x" + W1[:-1], "<tool_call>" + W1,
              tc("weather", {"city": "Paris"}), tc("weather", {"city": "Paris", "days": 9}),
              tc("nope", {"q": "dogs"}), tc("search", {"q": "birds"}), W1 + "<tool_call>"]),
    "at_least_one": (qwen(at_least_one=True), [W1, W1 + " and more", S1 + "x" + W1],
                     ["", "hello", "hi " + W1]),  # XGrammar: the first tag opens the output
    "stop_after_first": (qwen(stop_after_first=True), ["", "text", "text " + W1, W1],
                         [W1 + S1, "text " + W1 + " more", W1 + "\n"]),
    "exactly_one": (qwen(at_least_one=True, stop_after_first=True), [W1, S1], ["", "x" + W1, W1 + "x", W1 + S1]),
    "excludes": (qwen(excludes=["<|im_end|>"]), ["plain", "a " + W1], ["a<|im_end|>", W1 + "<|im_end|>"]),
    # a trigger inside the thinking does not fire: any_text in a tag reads to the tag's end
    "think": (THINK_THEN_CALLS, ["<think></think>", "<think>maybe <tool_call>{bad</think>answer " + tc("weather", {"city": "Oslo", "days": 1}),
                                 "<think>\n</think>\n"],
              ["", "<think>", "<think></think>" + "x<tool_call>{bad", "<think></think><tool_call>x", "x<think></think>"]),
    "tags_with_separator": ({"type": "structural_tag", "format": {"type": "tag", "begin": "[", "end": "]", "content": {
        "type": "tags_with_separator", "separator": ", ", "tags": [
            {"begin": "<a>", "content": {"type": "regex", "pattern": "[0-9]{1,3}"}, "end": "</a>"},
            {"type": "tag", "begin": "<b>", "content": {"type": "const_string", "value": "yes"}, "end": "</b>"}]}}},
        ["[]", "[<a>1</a>]", "[<a>12</a>, <b>yes</b>, <a>7</a>]"],
        ["", "[, ]", "[<a>1</a>,<a>2</a>]", "[<a></a>]", "[<a>1234</a>]", "[<a>1</a>, ]"]),
    "separator_at_least_one": ({"type": "structural_tag", "format": {
        "type": "tags_with_separator", "separator": "\n", "at_least_one": True, "tags": [
            {"begin": "<x>", "content": {"type": "grammar", "grammar": 'root ::= [a-c]+ ("-" [a-c]+)?'}, "end": "</x>"}]}},
        ["<x>a</x>", "<x>ab-c</x>\n<x>c</x>"], ["", "<x>a</x>\n", "<x>d</x>", "<x>a-</x>"]),
    "or_and_sequence": ({"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "or", "elements": [{"type": "const_string", "value": "A:"}, {"type": "regex", "pattern": "B[0-9]:"}]},
        {"type": "json_schema", "json_schema": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}}]}},
        ["A:[]", "B7:[true, false]", "A:[false]"], ["A:", "C:[]", "A:[true,false]", "B:[]", "A:[true, true, true]"]),
    # an unlimited content inside a tag takes the tag's end strings (a list here)
    "tag_end_list": ({"type": "structural_tag", "format": {"type": "tag", "begin": "<r>", "content": {
        "type": "triggered_tags", "triggers": ["@"], "tags": [
            {"begin": "@n(", "content": {"type": "regex", "pattern": "[0-9]+"}, "end": ")"}]},
        "end": ["</r>", "<end/>"]}},
        ["<r></r>", "<r>x @n(1) y</r>", "<r>@n(22)<end/>"], ["<r>", "<r>@x</r>", "<r></r>x", "<r>@n()</r>"]),
    # the legacy form (vLLM, SGLang): structures of JSON Schemas and triggers
    # A grammar with recursive rules inside a tag: its calls are linked
    # into the whole (lists nest to any depth).
    "recursive_grammar": ({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<list>"], "tags": [{
            "begin": "<list>", "end": "</list>", "content": {
                "type": "grammar", "grammar": 'root ::= "[" (item ("," item)*)? "]"\nitem ::= [a-z]+ | root\n'}}]}},
        ["", "x", "hi <list>[a,[b,[c]]]</list> ok", "<list>[[[[[[]]]]]]</list><list>[]</list>", "<list>[]</list>"],
        ["<list>[a,[b]</list>", "<list>[a]]</list>", "<list>[a,]</list>", "a <list>", "<list>[]</list"]),
    # A grammar whose recursive rule ends in whitespace that its caller's
    # newline competes with: the rule is rewritten before it is linked
    # into the tag (fsm/grammar.c, "returns absorbed").
    "absorbed_grammar": ({"type": "structural_tag", "format": {
        "type": "tag", "begin": "<g>", "end": "</g>", "content": {
            "type": "grammar", "grammar": 'root ::= item ("\\n" item)*\n'
                                           'item ::= "[" ws (item ws ("," ws item ws)*)? "]" ws | [a-z]+ ws\n'
                                           'ws ::= [ \\t\\n]*\n'}}},
        ["<g>a</g>", "<g>[a, [b]]\nc </g>", "<g>[ ]\n\n[[x]]</g>", "<g>a\n</g>"],
        ["<g></g>", "<g>[a,]</g>", "<g>a b</g>", "<g>\na</g>", "<g>a"]),
    "legacy": ({"type": "structural_tag", "triggers": ["<function="],
                "structures": [{"begin": "<function=weather>", "schema": WEATHER, "end": "</function>"}]},
               ["", "hi <function=weather>{\"city\": \"Rome\", \"days\": 2}</function> bye"],
               ["<function=other>{}</function>", "<function=weather>{}</function>",
                "<function=weather>{\"city\": \"Rome\", \"days\": 2}"]),
}


def run(verb, stag, *args, stdin=None):
    b = sieve_bin()
    assert os.access(b, os.X_OK), f"{b} is not built (make build, or set SIEVE_BIN)"
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as f:
        f.write(stag if isinstance(stag, str) else json.dumps(stag))
        f.flush()
        return subprocess.run([b, verb, "--structural-tag", f.name, *args], input=stdin, capture_output=True,
                              text=True, encoding="utf-8", timeout=120)


def match(stag, cands):
    r = run("match", stag, stdin="".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cands))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.split()
    assert len(lines) == len(cands)
    return [x == "1" for x in lines]


@pytest.mark.parametrize("name", sorted(CASES))
def test_verdicts(name):
    """The hand-written verdicts, the oracle's and sieve's, all agree."""
    stag, good, bad = CASES[name]
    o = Oracle(stag)
    for s in good:
        assert o.accepts(s), f"the oracle rejects a string the case accepts: {s!r}"
    for s in bad:
        assert not o.accepts(s), f"the oracle accepts a string the case rejects: {s!r}"
    got = match(stag, good + bad)
    wrong = [(s, g) for s, g in zip(good + bad, got) if g != (s in good)]
    assert not wrong, f"sieve's verdicts differ (string, sieve): {wrong}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_samples_and_near_misses(name):
    """sieve's samples are accepted by the oracle; on the samples, the
    accepted strings and near misses of both, sieve and the oracle agree."""
    stag, good, _ = CASES[name]
    r = run("sample", stag, "-n", "30", "--seed", "11", "--max-len", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    samples = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(samples) == 30
    o = Oracle(stag)
    for s in samples:
        assert o.accepts(s), f"sieve sampled a string the oracle rejects: {s!r}"
    rng = random.Random(5)
    pool = sorted(set("<>/{}\"[]:, @\n\t0123456789abcxyz_-") | set("".join(good)))
    cands = dedupe([m for s in samples[:10] + good for m in mutations(s, rng, pool)])
    got = match(stag, cands)
    wrong = [(c, g) for c, g in zip(cands, got) if g != o.accepts(c)]
    assert not wrong, f"sieve and the oracle disagree (string, sieve's verdict): {wrong[:5]}"


def test_samples_hold_calls():
    """Where the tag opens the output, samples are tool calls whose
    arguments validate (re parses the tags out, jsonschema judges them)."""
    r = run("sample", qwen(at_least_one=True, stop_after_first=True), "-n", "40", "--seed", "3", "--max-len", "80")
    assert r.returncode == 0, r.stderr
    names = set()
    for s in (json.loads(line) for line in r.stdout.splitlines()):
        m = re.fullmatch(r'<tool_call>\{"name": "(\w+)", "arguments": (.*)\}</tool_call>', s, re.S)
        assert m, s
        names.add(m.group(1))
        jsonschema.validate(json.loads(m.group(2)), {"weather": WEATHER, "search": SEARCH}[m.group(1)])
    assert names == {"weather", "search"}


def test_calls_in_free_text_from_samples():
    """Free text around calls whose arguments sieve sampled from the
    schema alone: every such text is accepted, with one call or several,
    and the same text with a call's arguments broken is not."""
    b = sieve_bin()
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(WEATHER, f)
        f.flush()
        r = subprocess.run([b, "sample", "--schema", f.name, "-n", "12", "--seed", "4"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    args = [json.loads(line) for line in r.stdout.splitlines()]
    rng = random.Random(9)
    texts, broken = [], []
    for i, a in enumerate(args):
        call_text = '<tool_call>{"name": "weather", "arguments": %s}</tool_call>' % a
        pre = "".join(rng.choice("ab <>/_\n") for _ in range(rng.randint(0, 12)))
        texts.append(pre + call_text + " then " + (S1 if i % 2 else ""))
        broken.append(pre + call_text.replace("}</tool_call>", "</tool_call>", 1))
    o = Oracle(qwen())
    assert all(o.accepts(t) for t in texts) and not any(o.accepts(t) for t in broken)
    assert match(qwen(), texts + broken) == [True] * len(texts) + [False] * len(broken)


@pytest.mark.parametrize("stag, kind, pointer, words", [
    ({"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "any_text"},
                                                                         {"type": "const_string", "value": "x"}]}},
     "unsupported", "/format/elements/0", "only the last element"),
    ({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<a"], "tags": [
        {"begin": "<b>", "content": {"type": "const_string", "value": "x"}, "end": "</b>"}]}},
     "unsupported", "/format/tags/0/begin", "none of the triggers"),
    ({"type": "structural_tag", "format": {"type": "tag", "begin": "<x>", "end": "</x>", "content": {
        "type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"minimum": "z"}}}}}},
     "syntax", "/format/content/json_schema/properties/a/minimum", "minimum"),
    ({"type": "structural_tag", "format": {"type": "regex", "pattern": "a(?=b)"}}, "unsupported", "/format/pattern",
     "lookahead"),
    ({"type": "structural_tag", "format": {"type": "tag", "begin": "<t>", "end": "a</t>", "content": {
        "type": "grammar", "grammar": 'root ::= l\nl ::= "(" l? ")" "a"?\n'}}},
     "unsupported", "", "told apart by the next character"),
    ({"type": "structural_tag", "format": {"type": "grammar", "grammar": 'root ::= "a" ('}},
     "syntax", "/format/grammar", "line 1"),
    ({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<a>", "a"], "tags": [
        {"begin": "<a>", "content": {"type": "const_string", "value": "x"}, "end": "</a>"}]}},
     "unsupported", "/format/triggers", "part of"),
    ({"type": "structural_tag", "format": {"type": "tag", "begin": "<t>", "end": "</t>", "content": {
        "type": "any_text", "excludes": ["</t>x"]}}}, "unsupported", "/format/content", "part of"),
    ({"type": "structural_tag", "format": {"type": "or", "elements": [
        {"type": "any_text"}, {"type": "const_string", "value": "x"}]}}, "unsupported", "/format/elements", "mixes"),
    ({"type": "structural_tag", "format": {"type": "bogus"}}, "unsupported", "/format/type", "unknown format"),
    ({"type": "structural_tag", "format": {"type": "const_string", "value": "x", "text": "y"}},
     "unsupported", "/format/text", "unknown field"),
    ({"type": "structural_tag", "format": {"type": "tag", "begin": "<x>", "content": {"type": "any_text"}, "end": ""}},
     "syntax", "/format/end", "non-empty end"),
    ({"type": "structural_tag", "format": {"type": "const_string"}}, "syntax", "/format/value", "required"),
    ({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": [], "tags": []}},
     "syntax", "/format/triggers", "non-empty"),
    ({"type": "structural_tag", "triggers": ["<f="], "structures": [
        {"begin": "<f=a>", "schema": {"type": "bogus"}, "end": "</f>"}]}, "syntax", "/structures/0/schema/type", "bogus"),
    ({"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "a"}, {"type": "json_schema", "json_schema": False}]}},
     "empty", "/format/elements/1/json_schema", "matches no value"),
    ({"type": "json_schema", "format": {}}, "syntax", "/type", "structural_tag"),
])
def test_errors(stag, kind, pointer, words):
    """A bad structural tag is exit 2 with the error's type, its JSON
    pointer and words that say what is wrong."""
    r = run("compile", stag)
    assert r.returncode == 2, r.stdout + r.stderr
    err = json.loads(r.stdout)["error"]
    assert err["type"] == kind and err.get("pointer", "") == pointer and words in err["message"], err


def test_nesting_budget():
    f = {"type": "const_string", "value": "x"}
    for _ in range(40):
        f = {"type": "sequence", "elements": [f]}
    r = run("compile", {"type": "structural_tag", "format": f})
    err = json.loads(r.stdout)["error"]
    assert r.returncode == 2 and err["type"] == "budget" and "nest deeper" in err["message"], err


def test_not_json():
    r = run("compile", '{"type": "structural_tag", ')
    err = json.loads(r.stdout)["error"]
    assert r.returncode == 2 and err["type"] == "syntax" and "not JSON" in err["message"], err
