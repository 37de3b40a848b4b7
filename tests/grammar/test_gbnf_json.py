"""llama.cpp's json.gbnf (tests/data/gbnf/json.gbnf) through `sieve match
--grammar` against Python's json module, on the instances of the
JSON-Schema-Test-Suite spelled several ways and on near misses of them.

json.gbnf accepts a subset of JSON, and the expected verdict is exactly
"json.loads accepts the text, and the text is in that subset" (expected()).
Read off the grammar:

- the text is an object: `root ::= object`, with nothing before its `{`;
- every gap between tokens (and the end, after the root object) holds one
  `ws ::= | " " | "\\n" [ \\t]{0,20}`: nothing, one space, or a newline
  followed by at most 20 spaces and tabs (no \\r, no tab or second space
  without a newline first). Each gap is exactly one ws: after `{ [ : ,` the
  grammar's own ws, before `: , } ]` and at the end the ws that ends every
  string, number, literal, object and array;
- a string has no raw DEL (U+007F) besides JSON's excluded controls, and its
  escapes are \\" \\\\ \\b \\f \\n \\r \\t and \\uXXXX (no `\\/`);
- a number is -?(0-9 | 1-9 then up to 15 digits) (. digits)? and an
  exponent [eE][-+]? of one digit then up to 15 digits 1-9 (so 1e10 and 1e+20
  are out, 1e19 and 1e-05 are in: the grammar's own rule).
json.loads's NaN, Infinity and -Infinity are out (they are not in the grammar).

test_subset_is_the_grammar checks that statement against the Lark oracle of
the same grammar (no sieve needed); test_sieve_json_gbnf checks sieve.

The instances: the vendored suite (tests/data/json-schema-test-suite, always
there); with SIEVE_SHARED_DATA set (make test-extended sets it), also every
file under $SIEVE_SHARED_DATA/json-schema-test-suite/draft2020-12 (optional/
too), and then that folder must exist.
"""
import json
import os
import random
import re
from pathlib import Path

from gbnf_harness import CORPUS, ROOT, compile_result, dedupe, match, oracle

GRAMMAR = (CORPUS / "json.gbnf").read_text(encoding="utf-8")

WS = re.compile(r"[ \t\n\r]+")
STR = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
NUM = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
WS_OK = re.compile(r" |\n[ \t]{0,20}")
STR_OK = re.compile(r'"(?:[^"\\\x00-\x1f\x7f]|\\["\\bfnrt]|\\u[0-9a-fA-F]{4})*"', re.S)
NUM_OK = re.compile(r"-?(?:[0-9]|[1-9][0-9]{0,15})(?:\.[0-9]+)?(?:[eE][-+]?[0-9][1-9]{0,15})?")


def loads_ok(text):
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def in_subset(text):
    """Whether a text json.loads accepts is in json.gbnf's subset (above)."""
    if not text.startswith("{"):
        return False
    i = 0
    while i < len(text):
        c = text[i]
        if c in " \t\n\r":
            m, ok = WS.match(text, i), WS_OK
        elif c == '"':
            m, ok = STR.match(text, i), STR_OK
        elif c in "-0123456789":
            m, ok = NUM.match(text, i), NUM_OK
        elif c in "{}[],:":
            i += 1
            continue
        else:
            lit = next((w for w in ("true", "false", "null") if text.startswith(w, i)), None)
            if lit is None:
                return False          # NaN, Infinity
            i += len(lit)
            continue
        if m is None or not ok.fullmatch(m.group()):
            return False
        i = m.end()
    return True


def expected(text):
    return loads_ok(text) and in_subset(text)


def suite_files():
    files = sorted((ROOT / "tests" / "data" / "json-schema-test-suite" / "draft2020-12").glob("*.json"))
    shared = os.environ.get("SIEVE_SHARED_DATA")
    if shared:
        d = Path(shared) / "json-schema-test-suite" / "draft2020-12"
        assert d.is_dir(), f"{d} is missing (SIEVE_SHARED_DATA is set; see ../shared/data/README.md)"
        files += sorted(d.rglob("*.json"))
    return files


def instances():
    out = {}
    for f in suite_files():
        for group in json.loads(f.read_text(encoding="utf-8")):
            for t in group["tests"]:
                out.setdefault(json.dumps(t["data"], sort_keys=True), t["data"])
    return list(out.values())


def utf8_ok(s):
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:       # a lone surrogate, written raw
        return False


def spellings(v):
    base = json.dumps(v)
    out = [
        base,                                                   # ", " and ": "
        json.dumps(v, ensure_ascii=False),
        json.dumps(v, separators=(",", ":")),
        json.dumps(v, indent=2),                                # deep ones pass 20 spaces
        json.dumps(v, indent="\t", ensure_ascii=False),
        json.dumps(v, separators=(" ,", " : ")),                # a space before , and :
        json.dumps(v, indent=2).replace("\n", "\r\n"),          # \r: JSON, not the grammar's
        json.dumps(v, indent=1, separators=(",", ":")) + "\n",
        " " + base,                                             # nothing may precede the root
        base + " ",
        base + "\n\t ",
        base + "  ",
    ]
    return [s for s in out if utf8_ok(s)]


POOL = list(' \t\n\r{}[],:"\\/-+.0123456789eEtfnurlsaxN\x00\x1f\x7f\u00e9\u2028\U0001F600')


def near_misses(text, rng):
    n = len(text)
    i, j = rng.randrange(n), rng.randrange(n + 1)
    return [text[:i] + text[i + 1:],                     # a character deleted
            text[:j] + rng.choice(POOL) + text[j:],      # one inserted
            text[:i] + rng.choice(POOL) + text[i + 1:],  # one replaced
            text[:rng.randrange(n)]]                     # cut


HAND = [
    '{}', '{ }', '{  }', '{\n}', '{\n\t\t}', '{}\n\n', '{}\t', '{}\r\n', '{"a":1}', '{"a" :1}', '{"a":1 ,"b":2}',
    '{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}', '{"a": 1e400}', '{"a": -0}', '{"a": 0.0}', '{"a": 1E+2}',
    '{"a": 1e10}', '{"a": 1e19}', '{"a": 1e-05}', '{"a": 1.5e+300}', '{"a": 1234567890123456}',
    '{"a": 12345678901234567}', '{"a": 01}', '{"a": .5}', '{"a": 5.}', '{"a": +1}',
    '{"a": "\\/"}', '{"a": "\u2028"}', '{"a": "\x7f"}', '{"a": "\x1f"}', '{"a": "\\ud800"}', '{"a": "\\u00E9"}',
    '{"a": "\\x41"}', '{"a": "\\U0041"}', '{"a": [] }', '{"a": [1,]}', '{"a": {}}', '{"a": tru}', '{"a": nul}',
    '{a: 1}', "{'a': 1}", '{"a": 1}}', '{"a": 1', '[]', '[1]', '"a"', '1', 'null', '',
    '{"a":' + " " * 2 + '1}', '{"a":\n' + " " * 20 + '1}', '{"a":\n' + " " * 21 + '1}', '{"a":\n\t \t1}',
]


def texts():
    rng = random.Random(12345)
    out = list(HAND)
    for v in instances():
        sp = spellings(v)
        out += sp
        out += near_misses(sp[0], rng) + near_misses(sp[2], rng)
    return [t for t in dedupe(out) if utf8_ok(t)]


TEXTS = texts()


def test_texts_are_not_one_sided():
    verdicts = [expected(t) for t in TEXTS]
    assert sum(verdicts) >= 300 and len(verdicts) - sum(verdicts) >= 300, (sum(verdicts), len(verdicts))
    # the subset is a real restriction of what json.loads accepts
    assert sum(loads_ok(t) for t in TEXTS) - sum(verdicts) >= 300


def test_subset_is_the_grammar():
    """The subset stated above is json.gbnf's language, as the Lark oracle
    reads the grammar."""
    o = oracle(GRAMMAR)
    wrong = [(t, expected(t)) for t in TEXTS if o.accepts(t) != expected(t)]
    assert wrong == [], f"{len(wrong)} texts where the subset statement and the grammar differ: {wrong[:10]}"


def test_sieve_json_gbnf():
    rc, obj = compile_result(GRAMMAR)
    assert rc == 0, f"json.gbnf does not compile: {obj}"
    got = match(GRAMMAR, TEXTS)
    wrong = [(t, "sieve accepts" if g else "sieve rejects") for t, g in zip(TEXTS, got) if g != expected(t)]
    assert wrong == [], f"sieve and json.loads+subset differ on {len(wrong)} of {len(TEXTS)} texts: {wrong[:10]}"
