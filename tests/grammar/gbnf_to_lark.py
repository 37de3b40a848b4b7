"""GBNF (llama.cpp's grammar format) to a Lark grammar: the independent
oracle of the GBNF tests (tests/grammar/test_gbnf*.py).

It reads a grammar the way llama.cpp's parser (src/llama-grammar.cpp) reads
one, and writes a Lark grammar that Lark's Earley parser (dynamic lexer)
accepts on exactly the same strings (Python str, one character = one code
point, as llama.cpp matches code points):

- `name ::= alternatives`, one rule per name (a name written twice is an
  error here; llama.cpp would keep the last one). Names are llama.cpp's word
  characters [a-zA-Z0-9-]; each becomes the Lark rule `r<index>_<name>` in
  lower case with `-` as `_`, so names that differ only in case or in `-`/`_`
  cannot collide. The start rule is `start: <root's rule>`.
- `|`, `( ... )` (a helper rule `g<n>`), the empty alternative (an empty Lark
  expansion), `""` (nothing).
- Every character matcher is a Lark terminal that matches exactly one
  character or one fixed string, so Lark's dynamic lexer can split the input
  in only one way per terminal and the language is the GBNF one:
  a literal "abc" is a regex terminal for the fixed text; a class [...] or
  [^...] is a one-character regex class; `.` is /./s (any character,
  newlines too). Characters are written in the regexes as themselves (ASCII
  letters and digits), backslash-escaped (ASCII punctuation) or as \\uXXXX /
  \\UXXXXXXXX, which Lark evaluates to the character itself; identical
  matchers share one terminal. A class range whose end is below its start
  matches nothing (llama.cpp's comparison), and is dropped.
- Postfix operators apply to the item just before them (a whole literal, a
  class, `.`, a rule reference or a group), as in llama.cpp; each becomes a
  helper rule: `x?` -> `o: | x`, `x*` -> `s: | s x`, `x+` -> `x` then `x*`,
  `x{m}` -> m copies, `x{m,}` -> m copies then `x*`, `x{m,n}` -> m copies
  then a chain of n-m nested optionals (`c_k: | x c_(k-1)`). Helper rules
  are shared between identical uses.
- Escapes in literals and classes: \\n \\t \\r \\\\ \\" \\[ \\] and \\xHH
  \\uHHHH \\UHHHHHHHH (exactly 2, 4, 8 hex digits); any other escape is an
  error, as in llama.cpp.
- Layout as in llama.cpp: spaces, tabs and `#` comments anywhere between
  items; a newline ends a rule, except inside parentheses, right after
  `::=` and right after `|`.

Command line (for debugging):
    gbnf_to_lark.py GRAMMAR            print the Lark grammar
    gbnf_to_lark.py GRAMMAR --match    read one JSON string literal per line
                                       on stdin, print 1 or 0 per line
"""
import json
import sys

__all__ = ["GbnfError", "parse_gbnf", "to_lark", "Oracle"]


class GbnfError(ValueError):
    """A grammar llama.cpp's parser would refuse (or that this reader does
    not take); .offset is the character offset in the grammar text."""

    def __init__(self, message, offset):
        super().__init__("%s (at offset %d)" % (message, offset))
        self.offset = offset


# ---- the AST ---------------------------------------------------------------
# alternatives: list of sequences; sequence: list of items; item: (atom, min,
# max) with max None for no bound; atom: ("lit", str) | ("cls", negated,
# ((lo, hi), ...)) | ("any",) | ("ref", name, offset) | ("group", alternatives)

def _is_word(c):
    return c != "" and (("a" <= c <= "z") or ("A" <= c <= "Z") or ("0" <= c <= "9") or c == "-")


class _Reader:
    def __init__(self, text):
        self.s = text
        self.i = 0

    def peek(self, k=0):
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def fail(self, msg, at=None):
        raise GbnfError(msg, self.i if at is None else at)

    def space(self, newline_ok):
        while True:
            c = self.peek()
            if c in (" ", "\t") or (newline_ok and c in ("\r", "\n")):
                self.i += 1
            elif c == "#":
                while self.peek() not in ("", "\r", "\n"):
                    self.i += 1
            else:
                return

    def name(self):
        start = self.i
        while _is_word(self.peek()):
            self.i += 1
        if self.i == start:
            self.fail("expecting a rule name")
        return self.s[start:self.i]

    def int(self):
        start = self.i
        while "0" <= self.peek() <= "9" and self.peek() != "":
            self.i += 1
        if self.i == start:
            self.fail("expecting an integer")
        return int(self.s[start:self.i])

    def char(self):
        """One character of a literal or class (an escape or itself)."""
        c = self.peek()
        if c == "":
            self.fail("unexpected end of input")
        if c != "\\":
            self.i += 1
            return ord(c)
        e = self.peek(1)
        digits = {"x": 2, "u": 4, "U": 8}.get(e)
        if digits:
            h = self.s[self.i + 2:self.i + 2 + digits]
            if len(h) != digits or any(ch not in "0123456789abcdefABCDEF" for ch in h):
                self.fail("expecting %d hex digits after \\%s" % (digits, e))
            self.i += 2 + digits
            return int(h, 16)
        simple = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]"}
        if e in simple:
            self.i += 2
            return ord(simple[e])
        self.fail("unknown escape \\%s" % e)

    def alternates(self, nested):
        alts = [self.sequence(nested)]
        while self.peek() == "|":
            self.i += 1
            self.space(True)
            alts.append(self.sequence(nested))
        return alts

    def sequence(self, nested):
        seq = []
        last = None          # index in seq of the item a postfix applies to
        while self.peek() != "":
            c = self.peek()
            at = self.i
            if c == '"':
                self.i += 1
                chars = []
                while self.peek() != '"':
                    if self.peek() == "":
                        self.fail("unexpected end of input in a literal")
                    chars.append(chr(self.char()))
                self.i += 1
                self.space(nested)
                if chars:
                    seq.append([("lit", "".join(chars)), 1, 1])
                    last = len(seq) - 1
                else:
                    last = None   # llama.cpp: nothing for a postfix to repeat
            elif c == "[":
                self.i += 1
                neg = self.peek() == "^"
                if neg:
                    self.i += 1
                ranges = []
                while self.peek() != "]":
                    if self.peek() == "":
                        self.fail("unexpected end of input in a class")
                    lo = self.char()
                    hi = lo
                    if self.peek() == "-" and self.peek(1) != "]":
                        if self.peek(1) == "":
                            self.fail("unexpected end of input in a class")
                        self.i += 1
                        hi = self.char()
                    ranges.append((lo, hi))
                self.i += 1
                if not ranges:
                    self.fail("an empty character class", at)
                self.space(nested)
                seq.append([("cls", neg, tuple(ranges)), 1, 1])
                last = len(seq) - 1
            elif _is_word(c):
                name = self.name()
                self.space(nested)
                seq.append([("ref", name, at), 1, 1])
                last = len(seq) - 1
            elif c == "(":
                self.i += 1
                self.space(True)
                alts = self.alternates(True)
                if self.peek() != ")":
                    self.fail("expecting ')'")
                self.i += 1
                self.space(nested)
                seq.append([("group", alts), 1, 1])
                last = len(seq) - 1
            elif c == ".":
                self.i += 1
                self.space(nested)
                seq.append([("any",), 1, 1])
                last = len(seq) - 1
            elif c in "*+?{":
                self.i += 1
                self.space(nested)
                if c == "*":
                    lo, hi = 0, None
                elif c == "+":
                    lo, hi = 1, None
                elif c == "?":
                    lo, hi = 0, 1
                else:
                    if not ("0" <= self.peek() <= "9" and self.peek() != ""):
                        self.fail("expecting an integer after '{'")
                    lo = self.int()
                    self.space(nested)
                    if self.peek() == "}":
                        hi = lo
                    elif self.peek() == ",":
                        self.i += 1
                        self.space(nested)
                        hi = None
                        if "0" <= self.peek() <= "9" and self.peek() != "":
                            hi = self.int()
                            self.space(nested)
                        if self.peek() != "}":
                            self.fail("expecting '}'")
                    else:
                        self.fail("expecting ',' or '}'")
                    self.i += 1
                    self.space(nested)
                    if hi is not None and hi < lo:
                        self.fail("a repetition {%d,%d} whose maximum is below its minimum" % (lo, hi), at)
                if last is None:
                    self.fail("'%s' with no preceding item to repeat" % c, at)
                item = seq[last]
                # a postfix on a postfixed item repeats the whole of it
                if (item[1], item[2]) != (1, 1):
                    item[:] = [("group", [[list(item)]]), 1, 1]
                item[1], item[2] = lo, hi
            else:
                break
        return seq


def parse_gbnf(text):
    """{rule name: alternatives} of a GBNF text, in definition order; raises
    GbnfError as llama.cpp's parser would fail (plus: a rule defined twice,
    an empty class, a repetition whose maximum is below its minimum, no
    `root`)."""
    r = _Reader(text)
    rules = {}
    r.space(True)
    while r.peek() != "":
        at = r.i
        name = r.name()
        r.space(False)
        if r.s[r.i:r.i + 3] != "::=":
            r.fail("expecting '::='")
        r.i += 3
        r.space(True)
        if name in rules:
            r.fail("rule %r is defined twice" % name, at)
        rules[name] = r.alternates(False)
        if r.peek() == "\r":
            r.i += 2 if r.peek(1) == "\n" else 1
        elif r.peek() == "\n":
            r.i += 1
        elif r.peek() != "":
            r.fail("expecting a newline or the end")
        r.space(True)

    def check(alts):
        for seq in alts:
            for atom, _, _ in seq:
                if atom[0] == "ref" and atom[1] not in rules:
                    raise GbnfError("undefined rule %r" % atom[1], atom[2])
                if atom[0] == "group":
                    check(atom[1])
    for alts in rules.values():
        check(alts)
    if "root" not in rules:
        raise GbnfError("the grammar has no rule named root", len(text))
    return rules


# ---- Lark text ---------------------------------------------------------------

def _esc(cp):
    """A code point inside a Lark /regex/ (Lark turns \\uXXXX into the
    character itself before Python's re sees it, so only letters, digits and
    escaped punctuation may be written as such)."""
    c = chr(cp)
    if c.isascii() and c.isalnum():
        return c
    if c == "\\":
        return "\\\\"
    if 0x21 <= cp <= 0x7E:
        return "\\" + c
    return "\\u%04x" % cp if cp <= 0xFFFF else "\\U%08x" % cp


class _Writer:
    def __init__(self, rules):
        self.names = {n: "r%d_%s" % (i, n.lower().replace("-", "_")) for i, n in enumerate(rules)}
        self.terms = {}      # regex text -> terminal name
        self.helpers = {}    # expansion text -> helper rule name
        self.lines = []

    def term(self, regex):
        if regex not in self.terms:
            self.terms[regex] = "T%d" % len(self.terms)
        return self.terms[regex]

    def helper(self, key, body):
        """A helper rule for what `key` names, shared between identical uses;
        body(name) is its expansions (they may refer to the rule itself)."""
        if key not in self.helpers:
            name = "h%d" % len(self.helpers)
            self.helpers[key] = name
            self.lines.append("%s: %s" % (name, body(name)))
        return self.helpers[key]

    def atom(self, a):
        kind = a[0]
        if kind == "lit":
            return self.term("/" + "".join(_esc(ord(c)) for c in a[1]) + "/")
        if kind == "any":
            return self.term("/./s")
        if kind == "cls":
            parts = ["%s-%s" % (_esc(lo), _esc(hi)) if lo != hi else _esc(lo) for lo, hi in a[2] if lo <= hi]
            if not parts:   # only reversed ranges: matches nothing, or anything when negated
                return self.term("/./s") if a[1] else self.term("/[^\\s\\S]/")
            return self.term("/[%s%s]/" % ("^" if a[1] else "", "".join(parts)))
        if kind == "ref":
            return self.names[a[1]]
        if kind == "group":
            text = self.alts(a[1])
            return self.helper(("group", text), lambda name: text)
        raise AssertionError(a)

    def item(self, atom, lo, hi):
        s = self.atom(atom)
        out = [s] * lo
        if hi is None:
            out.append(self.helper(("star", s), lambda name: "| %s %s" % (name, s)))
        elif hi > lo:
            chain = None
            for k in range(1, hi - lo + 1):
                tail = " " + chain if chain else ""
                chain = self.helper(("opt", k, s), lambda name: "| %s%s" % (s, tail))
            out.append(chain)
        return " ".join(out)

    def seq(self, seq):
        return " ".join(x for x in (self.item(*it) for it in seq) if x)

    def alts(self, alts):
        return " | ".join(self.seq(s) for s in alts)


def to_lark(text):
    """The Lark grammar text for a GBNF text; its start rule is `start`."""
    rules = parse_gbnf(text)
    w = _Writer(rules)
    body = ["%s: %s" % (w.names[n], w.alts(alts)) for n, alts in rules.items()]
    out = ["start: " + w.names["root"]] + body + w.lines
    out += ["%s: %s" % (name, rx) for rx, name in w.terms.items()]
    return "\n".join(out) + "\n"


class Oracle:
    """Lark's Earley parser on the translation of a GBNF grammar:
    Oracle(text).accepts(s) is whether the grammar accepts the string s."""

    def __init__(self, text):
        import lark
        self._lark = lark
        self.lark_text = to_lark(text)
        self.parser = lark.Lark(self.lark_text, start="start", parser="earley", lexer="dynamic",
                                ambiguity="forest")

    def accepts(self, s):
        try:
            self.parser.parse(s)
            return True
        except self._lark.exceptions.LarkError:
            return False


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 64
    with open(argv[1], encoding="utf-8") as f:
        text = f.read()
    try:
        if "--match" not in argv[2:]:
            sys.stdout.write(to_lark(text))
            return 0
        o = Oracle(text)
    except GbnfError as e:
        print(json.dumps({"error": {"message": str(e), "offset": e.offset}}))
        return 2
    for line in sys.stdin:
        print(1 if o.accepts(json.loads(line)) else 0, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
