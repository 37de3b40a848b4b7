"""Lark-style EBNF grammars (`--grammar`, detected by having no `::=`):
sieve against Lark itself, the `lark` package's Earley parser with the
`dynamic_complete` lexer (every split of the text into terminals, which is
the language sieve reads: fsm/grammar_lark.c).

For each grammar in LARK:
- `sieve compile --grammar` succeeds;
- 40 strings of `sieve sample --grammar` are all accepted by Lark;
- `sieve match --grammar` accepts them and agrees with Lark on near misses of
  them (a character deleted, inserted, replaced or appended, two swapped,
  the string cut) and on the hand-written ACCEPT and REJECT strings, which
  Lark must also judge as listed (so the lists stay true).

Then: a strict JSON grammar in Lark gives json.loads's verdicts on the
JSON-Schema-Test-Suite texts of test_gbnf_json.py; what sieve refuses is
refused with a typed error and the line and column; the same language in
GBNF and in Lark compiles to the same automaton.
"""
import json
import random
import zlib

import lark
import pytest

from gbnf_harness import compile_result, dedupe, match, mutations, sample

N_SAMPLES = 40
MAX_LEN = 64

LARK = {
    # Lark's own JSON example: aliases, ?rules, [optional], imports, %ignore.
    "json": r'''
?start: value
?value: object
      | array
      | string
      | SIGNED_NUMBER      -> number
      | "true"             -> true
      | "false"            -> false
      | "null"             -> null
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
''',
    # Arithmetic with recursion through parentheses; terminals by regex;
    # an inline-whitespace ignore given as a regex.
    "calc": r'''
start: sum
sum: product (("+" | "-") product)*
product: atom (("*" | "/") atom)*
atom: NUMBER | "-" atom | "(" sum ")" | NAME
NUMBER: /[0-9]+(\.[0-9]+)?/
NAME: /[a-z_]\w*/
%ignore / +/
''',
    # SQL-ish: case-insensitive keywords ("..."i), ~ repetition, ranges,
    # the import list form, an alias import, priorities, a comment.
    "select": r'''
start: "select"i columns "from"i NAME where? ";"?
columns: "*" | NAME ("," NAME)~0..3
where: "where"i NAME OP VALUE   // one condition
OP: "=" | "<" | ">"
VALUE.2: DIGIT~1..4 | "'" LETTER* "'"
NAME: ("a".."z" | "_")+
LETTER: "a".."z" | "A".."Z"
%import common (DIGIT, WS_INLINE)
%import common.NEWLINE -> NL
%ignore WS_INLINE
%ignore NL
''',
    # No %ignore: regex flags (i, s), a class with ']' first, escapes in
    # strings, a nested optional, a rule with a leading '|' line.
    "flags": r'''
start: greeting (" " tail)?
greeting:
    | /hello|hi/i
    | "\x41\u00e9\t" ["!" ["?"]]
tail: /[]a-c]+/ | /<.+>/s | "\d"
''',
    # Mutual recursion: balanced brackets of two kinds with ws inside.
    "brackets": r'''
start: pair*
pair: "(" pair* ")" | "[" inner "]"
inner: pair*
%ignore " "
''',
}

ACCEPT = {
    "json": ['{"a": [1, -2.5e3, "x\\"y"], "b": null}', " [ true , false ] ", "-3", "{}", '"\\u00e9"'],
    "calc": ["1+2*3", "x * (y - 2.5)", " - - 1 ", "a_1/b", "((1))"],
    "select": ["select * from t", "SELECT a, b from tab where a = 12;", "Select a\nfrom b where c > 'Xy'"],
    "flags": ["hello", "HeLLo", "Aé\t!?", "hi ]a", "hi <a\nb>", "Hi \\d", ""],
    "brackets": ["", "()", "([ ])", "[[][()]] ()", " ( ) "],
}
REJECT = {
    "json": ['{"a" 1}', "[1,]", "tru", '"ab\ncd"', "01x", "{'a': 1}"],
    "calc": ["1+", "(1", "1 2", "x y", "1.", ""],
    "select": ["select from t", "select a,b,c,d,e from t", "select * from t where a = 12345", "delete * from t"],
    "flags": ["hello!", "Aé\t?", "hi <>", "hi d", "hey"],
    "brackets": ["(", "(]", "[)", "x"],
}


def seed_of(name):
    return zlib.crc32(name.encode())


_parsers = {}


def lark_accepts(grammar, text):
    if grammar not in _parsers:
        _parsers[grammar] = lark.Lark(grammar, parser="earley", lexer="dynamic_complete")
    try:
        _parsers[grammar].parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


POOL = sorted(set(" \n\t\raZz09\"\\{}[](),:;-+.*/=<>!?#_'éÿ\u2028中") | {"\x7f"})


@pytest.mark.parametrize("name", sorted(LARK))
def test_lark_grammar(name):
    g = LARK[name]
    rc, obj = compile_result(g)
    assert rc == 0 and "error" not in obj, f"{name} does not compile: {obj}"
    samples = sample(g, N_SAMPLES, seed_of(name), MAX_LEN)
    rng = random.Random(seed_of(name))
    near = dedupe(m for s in samples for m in mutations(s, rng, POOL))
    own = ACCEPT[name] + REJECT[name]
    cands = dedupe(samples + own + near)
    want = [lark_accepts(g, s) for s in cands]
    assert all(w for s, w in zip(cands, want) if s in ACCEPT[name]), "an ACCEPT string Lark rejects"
    assert not any(w for s, w in zip(cands, want) if s in REJECT[name]), "a REJECT string Lark accepts"
    bad = [s for s, w in zip(cands, want) if s in samples and not w]
    assert bad == [], f"{name}: sieve sampled strings Lark rejects: {bad[:10]}"
    got = match(g, cands)
    wrong = [(s, "sieve" if m else "lark") for s, m, w in zip(cands, got, want) if m != w]
    assert wrong == [], f"{name}: sieve and Lark disagree on {len(wrong)} of {len(cands)} (who accepts): {wrong[:15]}"
    assert sum(want) >= 10 and len(want) - sum(want) >= 10, (sum(want), len(want))


# Strict JSON (RFC 8259) in Lark: its verdicts are json.loads's.
STRICT_JSON = r'''
start: value
value: object | array | STRING | NUMBER | "true" | "false" | "null"
object: "{" [member ("," member)*] "}"
member: STRING ":" value
array: "[" [value ("," value)*] "]"
STRING: "\"" (/[^"\\\x00-\x1f]/ | "\\" /["\\\/bfnrt]/ | "\\u" /[0-9a-fA-F]{4}/)* "\""
NUMBER: "-"? ("0" | /[1-9][0-9]*/) ("." /[0-9]+/)? (/[eE][-+]?[0-9]+/)?
%ignore /[ \t\n\r]+/
'''


def strict_loads_ok(text):
    def no_constant(c):
        raise ValueError(c)
    try:
        json.loads(text, parse_constant=no_constant)
        return True
    except ValueError:
        return False


def test_strict_json_in_lark_is_json_loads():
    from test_gbnf_json import TEXTS
    rc, obj = compile_result(STRICT_JSON)
    assert rc == 0, obj
    got = match(STRICT_JSON, TEXTS)
    want = [strict_loads_ok(t) for t in TEXTS]
    assert sum(want) >= 300 and len(want) - sum(want) >= 300
    wrong = [(t, "sieve accepts" if g else "sieve rejects") for t, g, w in zip(TEXTS, got, want) if g != w]
    assert wrong == [], f"sieve and json.loads differ on {len(wrong)} of {len(TEXTS)} texts: {wrong[:10]}"


@pytest.mark.parametrize("g, etype, where", [
    ('start: "a" (\n', "syntax", "line 1, column 12"),
    ('start: x\n', "syntax", "'x' is not defined"),
    ('rule: "a"\n', "syntax", "no rule named start"),
    ('start: "a"\nstart: "b"\n', "syntax", "defined twice"),
    ('start: _sep{"a", ","}\n', "unsupported", "template"),
    ('start: A\nA: /a/x\n', "unsupported", "flag 'x'"),
    ('start: A\nA: /^a/\n', "unsupported", "anchor"),
    ('start: "a"\n%declare B\n', "unsupported", "%declare"),
    ('start: "a"\n%import .other.B\n', "unsupported", "common library"),
    ('start: A\n%import common.NOPE\n', "unsupported", "common.NOPE"),
    ('start: A\nA: b\nb: "x"\n', "syntax", "terminal cannot use the rule 'b'"),
    ('start: <[1234]>\n', "unsupported", "special tokens"),
    ('start: "a\nb"\n', "syntax", "cannot span lines"),
    ('start: x\nx: x "a" | "a"\n', "unsupported", "left-recursive"),
    ('start: "a" ~ 5..2\n', "syntax", "maximum is below its minimum"),
    ('start: "a" ~ 99999\n', "budget", "repetition bound"),
    ('start: "b".."a"\n', "syntax", "below its start"),
])
def test_lark_refusals(g, etype, where):
    rc, obj = compile_result(g)
    assert rc == 2 and "error" in obj, (g, obj)
    e = obj["error"]
    assert e["type"] == etype and where in e["message"], (g, e)


def test_gbnf_and_lark_same_language():
    """One language written both ways compiles to one automaton (sieve
    compile prints its state and class counts; equal languages give equal
    minimal DFAs) and agrees on samples of each other."""
    gbnf = 'root ::= "[" (item ("," item)*)? "]"\nitem ::= [a-z]+ | root\n'
    lk = 'start: "[" (item ("," item)*)? "]"\nitem: /[a-z]+/ | start\n'
    a, b = compile_result(gbnf)[1], compile_result(lk)[1]
    assert (a["states"], a["byte_classes"]) == (b["states"], b["byte_classes"]), (a, b)
    sa, sb = sample(gbnf, 30, 1, 40), sample(lk, 30, 2, 40)
    assert all(match(lk, sa)) and all(match(gbnf, sb))
