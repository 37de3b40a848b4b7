"""A pattern counted to a length that outgrows the state budget is narrowed.

`"pattern": "^(?:\\S+\\s+){0,49}\\S+$"` with `"maxLength": 500` (a word
count within a character count, as MaskBench's Github_hard---o62060 writes
it) is an automaton of words times characters: past the 200,000-state
budget. Like a maxLength beyond max_string_length (512), the length is then
narrowed, never widened: halved while the product does not fit, down to 16
characters, and reported (`max_length_narrowed`). Every string the narrowed
automaton accepts is valid (checked against jsonschema and by sampling);
long valid strings may be refused. Without maxLength nothing is narrowed.
"""
import json

import jsonschema

from suite import assert_agrees, compile_stats as stats, sieve

DRAFT = "https://json-schema.org/draft/2020-12/schema"
WORDS = r"^(?:\S+\s+){0,49}\S+$"


def schema(max_len):
    return {"$schema": DRAFT, "type": "object", "required": ["summary"],
            "properties": {"summary": {"type": "string", "maxLength": max_len, "pattern": WORDS}}}


def test_word_count_within_a_length_is_narrowed_not_refused():
    s = schema(500)
    st = stats(s)
    assert st["max_length_narrowed"] >= 1, st
    short = ["one", "two words", "a few more words here", "ünïcödé wörds ok", "x " * 20 + "y"]
    bad = ["", " leading", "trailing ", "a  b" + " c" * 60, "tab\tok", 5]
    texts = [json.dumps({"summary": t}, ensure_ascii=False) for t in short + bad]
    assert_agrees(s, texts)
    # accepted long strings are valid; sampling stays inside the schema
    r = sieve("sample", s, "-n", "30", "--seed", "8", "--max-len", "700")
    assert r.returncode == 0, r.stderr
    v = jsonschema.Draft202012Validator(s)
    lines = r.stdout.split("\n")[:-1]
    assert len(lines) == 30
    for line in lines:
        assert v.is_valid(json.loads(json.loads(line))), line


def test_a_length_that_fits_is_not_narrowed():
    st = stats(schema(40))
    assert st["max_length_narrowed"] == 0, st
    texts = [json.dumps({"summary": "w " * k + "end"}) for k in (0, 5, 18, 19, 25)]
    assert_agrees(schema(40), texts)
