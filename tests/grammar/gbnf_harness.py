"""What the GBNF tests share: running `sieve VERB --grammar FILE`, the Lark
oracle under a time budget, and mutations of accepted strings."""
import contextlib
import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path

from gbnf_to_lark import Oracle, parse_gbnf

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "gbnf"


def sieve_bin():
    return os.environ.get("SIEVE_BIN", str(ROOT / "build" / "sieve"))


def sieve(verb, grammar, *args, stdin=None, timeout=120):
    """`sieve VERB --grammar FILE ARGS...` on a grammar text (in a temporary
    file), standard input from stdin: the CompletedProcess, text mode, UTF-8."""
    b = sieve_bin()
    assert os.access(b, os.X_OK), f"{b} is not built (make build, or set SIEVE_BIN)"
    with tempfile.NamedTemporaryFile("w", suffix=".gbnf", encoding="utf-8") as f:
        f.write(grammar)
        f.flush()
        return subprocess.run([b, verb, "--grammar", f.name, *args], input=stdin, capture_output=True,
                              text=True, encoding="utf-8", timeout=timeout)


def compile_result(grammar):
    """(exit code, the JSON object sieve compile printed)."""
    r = sieve("compile", grammar)
    try:
        obj = json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"sieve compile --grammar printed no JSON object (exit {r.returncode}):\n"
                             f"{r.stdout}{r.stderr}")
    return r.returncode, obj


def sample(grammar, n, seed, max_len):
    r = sieve("sample", grammar, "-n", str(n), "--seed", str(seed), "--max-len", str(max_len))
    assert r.returncode == 0, f"sieve sample failed (exit {r.returncode}):\n{r.stdout}{r.stderr}"
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(out) == n, f"sieve sample printed {len(out)} strings, not {n}:\n{r.stdout}"
    return out


def match(grammar, candidates):
    """sieve match's verdicts (bools), one per candidate string."""
    if not candidates:
        return []
    stdin = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in candidates)
    r = sieve("match", grammar, stdin=stdin)
    assert r.returncode == 0, f"sieve match failed (exit {r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
    lines = r.stdout.split()
    assert len(lines) == len(candidates) and set(lines) <= {"0", "1"}, \
        f"sieve match printed {len(lines)} verdicts for {len(candidates)} lines:\n{r.stdout[-2000:]}"
    return [x == "1" for x in lines]


class OracleTimeout(Exception):
    pass


@contextlib.contextmanager
def time_budget(seconds):
    """Raises OracleTimeout in the block after `seconds` (SIGALRM: the main
    thread only, which is where pytest runs tests)."""
    def on_alarm(signum, frame):
        raise OracleTimeout()
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


_oracles = {}


def oracle(grammar):
    if grammar not in _oracles:
        _oracles[grammar] = Oracle(grammar)
    return _oracles[grammar]


def _chars_of(alts, out):
    for seq in alts:
        for atom, _, _ in seq:
            if atom[0] == "lit":
                out.update(atom[1])
            elif atom[0] == "cls":
                for lo, hi in atom[2]:
                    for cp in (lo - 1, lo, hi, hi + 1):
                        if 0 <= cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF:
                            out.add(chr(cp))
            elif atom[0] == "group":
                _chars_of(atom[1], out)


COMMON_CHARS = set(" \n\t\raZz09\"\\{}[](),:;-+.*/=<>!#_~") | {"\x00", "\x1f", "\x7f", "\x80", "é", "ÿ", "Ā",
                                                               "\u2028", "中", "ー", "\ufffd", "\U0001F600"}


def char_pool(grammar):
    """Characters worth inserting: those the grammar names (literal
    characters, class bounds and their neighbours) and some common ones."""
    out = set(COMMON_CHARS)
    for alts in parse_gbnf(grammar).values():
        _chars_of(alts, out)
    return sorted(out)


def mutations(s, rng, pool):
    """Near misses of s: a character deleted, inserted, replaced, appended,
    two swapped, the string truncated."""
    out = []
    n = len(s)
    if n:
        i = rng.randrange(n)
        out.append(s[:i] + s[i + 1:])
        i = rng.randrange(n)
        out.append(s[:i] + rng.choice(pool) + s[i + 1:])
        out.append(s[:rng.randrange(n)])
    if n >= 2:
        i, j = sorted(rng.sample(range(n), 2))
        if s[i] != s[j]:
            out.append(s[:i] + s[j] + s[i + 1:j] + s[i] + s[j + 1:])
        i = rng.randrange(n - 1)
        out.append(s[:i] + s[i + 1] + s[i] + s[i + 2:])
    i = rng.randrange(n + 1)
    out.append(s[:i] + rng.choice(pool) + s[i:])
    out.append(s + rng.choice(pool))
    return out


def dedupe(xs):
    return list(dict.fromkeys(xs))


# ---- a second reading of the grammar, for the non-recursive ones ---------------------

class Recursive(Exception):
    pass


def to_python_re(grammar):
    """A Python regex (for re.fullmatch) of a grammar without recursion,
    built straight from the parsed rules: a check of the Lark oracle that
    shares only the reader (parse_gbnf) with it. Raises Recursive."""
    import re
    rules = parse_gbnf(grammar)

    def cls(neg, ranges):
        parts = "".join(re.escape(chr(lo)) + ("-" + re.escape(chr(hi)) if hi != lo else "")
                        for lo, hi in ranges if lo <= hi)
        if not parts:
            return "(?s:.)" if neg else "(?!)"
        return "[%s%s]" % ("^" if neg else "", parts)

    def alts(a, stack):
        return "(?:" + "|".join("".join(item(*it, stack) for it in seq) for seq in a) + ")"

    def item(atom, lo, hi, stack):
        x = one(atom, stack)
        if (lo, hi) == (1, 1):
            return x
        return "(?:%s){%d,%s}" % (x, lo, "" if hi is None else hi)

    def one(atom, stack):
        k = atom[0]
        if k == "lit":
            return re.escape(atom[1])
        if k == "any":
            return "(?s:.)"
        if k == "cls":
            return cls(atom[1], atom[2])
        if k == "group":
            return alts(atom[1], stack)
        if atom[1] in stack:
            raise Recursive(atom[1])
        return alts(rules[atom[1]], stack | {atom[1]})

    return re.compile(alts(rules["root"], {"root"}))


SOME_CHARS = [chr(c) for c in list(range(0x20, 0x7F)) + [0, 9, 10, 13, 0x7F, 0xA0, 0xE9, 0x2028, 0x3042, 0x4E2D,
                                                        0xFFFD, 0x1F600]]


def random_string(grammar, rng, max_depth=8):
    """A random derivation of root (a repetition of characters goes to its
    bound or up to 8 past its minimum, others 0 to 2 past it; at most
    max_depth rules deep, then the shortest alternative);
    negated classes and `.` draw from SOME_CHARS."""
    rules = parse_gbnf(grammar)

    def alts(a, d):
        seqs = a if d < max_depth else sorted(a, key=len)[:1]
        return "".join(item(*it, d) for it in rng.choice(seqs))

    def item(atom, lo, hi, d):
        if d >= max_depth:
            n = lo
        elif atom[0] in ("lit", "cls", "any"):     # characters: up to the bound, or 8 past the minimum
            n = rng.choice([lo, lo + 1, lo + 2, lo + 8, lo if hi is None else hi])
        else:
            n = rng.randint(lo, lo + 2)
        n = n if hi is None else min(n, hi)
        return "".join(one(atom, d) for _ in range(n))

    def one(atom, d):
        k = atom[0]
        if k == "lit":
            return atom[1]
        if k == "ref":
            return alts(rules[atom[1]], d + 1)
        if k == "group":
            return alts(atom[1], d + 1)
        if k == "cls" and not atom[1]:
            lo, hi = rng.choice([r for r in atom[2] if r[0] <= r[1]] or [(0x2FFFF, 0x2FFFF)])
            return chr(rng.randint(lo, hi))
        ranges = atom[2] if k == "cls" else ()
        for _ in range(100):
            c = rng.choice(SOME_CHARS)
            if not any(lo <= ord(c) <= hi for lo, hi in ranges):
                return c
        return "\U0002FFFF"

    return alts(rules["root"], 0)
