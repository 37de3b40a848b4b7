"""check_formats.py — our JSON Schema `format` languages (fsm/json_format.c)
against Python jsonschema's FormatChecker for draft 2020-12, with the
format-nongpl extras installed (tests/requirements.txt).

For every format:
  * soundness by sampling: thousands of strings sampled from our DFA (at three
    length scales) must all pass the checker;
  * hand-picked typical values must pass both, invalid ones fail both, and the
    spellings the language leaves out on purpose (documented at the top of
    fsm/json_format.c) pass the checker but not ours;
  * a differential run over generated near-miss candidates: whatever our DFA
    accepts the checker accepts, and whatever the checker accepts within our
    documented coverage our DFA accepts (for date, ipv4, ipv6, uri and
    uri-reference the coverage is everything: the languages are exact).

Our DFA is reached through the helper tests/format/sample_format.c: set
SAMPLE_FORMAT_BIN, or build it as build/tests/sample_format. Run with
`.venv/bin/python -m pytest -q tests/format/check_formats.py`.
"""

import json
import os
import pathlib
import random
import re
import subprocess

import pytest
from jsonschema import Draft202012Validator

CHECKER = Draft202012Validator.FORMAT_CHECKER
ROOT = pathlib.Path(__file__).resolve().parents[2]
FORMATS = ["date-time", "date", "time", "duration", "email", "hostname",
           "ipv4", "ipv6", "uri", "uri-reference", "uuid"]


def helper():
    path = pathlib.Path(os.environ.get("SAMPLE_FORMAT_BIN", ROOT / "build" / "tests" / "sample_format"))
    if not path.is_file():
        pytest.fail(f"{path} is missing: build the sample_format target or set SAMPLE_FORMAT_BIN")
    return str(path)


def sample(fmt, n, seed, soft_len):
    out = subprocess.run([helper(), fmt, str(n), str(seed), str(soft_len)],
                         check=True, capture_output=True, text=True).stdout
    values = [json.loads(line) for line in out.splitlines()]
    assert len(values) == n
    return values


def ours(fmt, values):
    """Whether our DFA accepts each value (a list of bools)."""
    values = list(values)
    text = "".join(json.dumps(v) + "\n" for v in values)
    out = subprocess.run([helper(), fmt, "--match"], input=text,
                         check=True, capture_output=True, text=True).stdout.split()
    assert len(out) == len(values)
    return [x == "1" for x in out]


def conforms(value, fmt):
    return CHECKER.conforms(value, fmt)


def test_checker_knows_every_format():
    # FormatChecker passes formats it does not know: without the extras
    # (rfc3339-validator, fqdn, rfc3986-validator, isoduration) every check
    # below would pass vacuously.
    missing = [f for f in FORMATS if f not in CHECKER.checkers]
    assert not missing, f"jsonschema checks none of {missing}: install tests/requirements.txt"


# ---- sampling --------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_samples_pass_checker(fmt):
    values = []
    for seed, soft_len in ((1, 8), (2, 40), (3, 300)):
        values += sample(fmt, 1000, seed, soft_len)
    bad = [v for v in values if not conforms(v, fmt)]
    assert not bad, f"{len(bad)}/{len(values)} samples of {fmt} fail the checker, e.g. {bad[:10]}"
    assert all(ours(fmt, values)), "the helper's --match disagrees with its own samples"
    # A sampler stuck on a few strings would make the check above weak.
    assert len(set(values)) >= 1000, f"only {len(set(values))} distinct samples"


# ---- hand-picked values ------------------------------------------------------

TYPICAL = {
    "date-time": ["2024-01-31T12:34:56Z", "2024-01-31T12:34:56.789Z", "2024-01-31T12:34:56+02:00",
                  "2024-01-31T12:34:56.123456-05:30", "1999-12-31T23:59:59Z", "2024-02-29T00:00:00Z",
                  "2000-02-29T08:00:00+00:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
                  "2023-06-15T09:30:00-07:00"],
    "date": ["2024-01-31", "2024-02-29", "2000-02-29", "2023-02-28", "1970-01-01", "0001-01-01",
             "9999-12-31", "2023-04-30", "1600-02-29", "2023-12-31"],
    "time": ["12:34:56Z", "00:00:00Z", "23:59:59Z", "12:34:56.789Z", "12:34:56+02:00", "08:15:00-05:00",
             "23:59:59.999999+14:00", "00:00:00.0-00:00"],
    "duration": ["P1D", "PT1H", "P3Y6M4DT12H30M5S", "PT30M", "P2W", "P1Y", "P1M", "PT0S", "P0D",
                 "P10DT2H", "PT36H"],
    "email": ["user@example.com", "john.doe@example.co.uk", "first.last+tag@sub.example.org",
              "a@b.co", "x_y-z@mail-server.example.com", "USER@EXAMPLE.COM", "o'brien@example.ie",
              "support123@company.io"],
    "hostname": ["example.com", "localhost", "www.example.com", "api.v2.example.co.uk", "my-host",
                 "a", "EXAMPLE.COM", "db-01.prod.us-east-1.example.internal",
                 "123.example", "a" * 63],
    "ipv4": ["192.168.0.1", "0.0.0.0", "255.255.255.255", "10.0.0.1", "127.0.0.1", "8.8.8.8",
             "172.16.254.3", "1.2.3.4", "100.64.0.10", "249.250.251.252"],
    "ipv6": ["::1", "::", "2001:db8::1", "fe80::1", "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
             "2001:db8:85a3::8a2e:370:7334", "::ffff:192.168.0.1", "1:2:3:4:5:6:7:8", "1::", "1:2:3:4:5:6:7::",
             "::2:3:4:5:6:7:8", "FE80::ABCD", "64:ff9b::192.0.2.33", "1:2:3:4:5:6:1.2.3.4"],
    "uri": ["https://example.com", "https://example.com/path/to/page?query=1&b=2#section",
            "http://user:pass@example.com:8080/", "mailto:user@example.com", "urn:isbn:0451450523",
            "ftp://ftp.example.org/file.txt", "http://[::1]:8080/", "http://192.168.0.1/index.html",
            "file:///etc/hosts", "https://example.com/a%20b", "data:text/plain,hello", "tel:+1-816-555-1212"],
    "uri-reference": ["https://example.com/x", "/path/to/resource", "../parent", "page.html#top",
                      "?q=1", "#frag", "", "//cdn.example.com/lib.js", "a/b/c", "mailto:x@y.z"],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000",
             "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "550e8400-e29b-41d4-a716-446655440000",
             "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "f47ac10b-58cc-4372-a567-0e02b2c3d479",
             "A987FBC9-4BED-3078-CF07-9141BA07C9F3", "01890a5d-ac96-774b-bcce-b302099a8057"],
}

INVALID = {
    "date-time": ["2024-01-31 12:34:56Z", "2024-01-31T12:34:56", "2023-02-29T00:00:00Z", "2024-13-01T00:00:00Z",
                  "2024-01-31T24:00:00Z", "2024-01-31T12:60:00Z", "2024-01-31T12:34:60Z", "0000-01-01T00:00:00Z",
                  "2024-01-31T12:34:56+24:00", "2024-01-31T12:34:56.Z", "2024-01-31T12:34Z", "1900-02-29T00:00:00Z"],
    "date": ["2023-02-29", "1900-02-29", "2100-02-29", "2024-02-30", "2024-04-31", "2024-13-01", "2024-00-10",
             "2024-01-00", "0000-01-01", "2024-1-01", "24-01-01", "2024/01/01", "20240131"],
    "time": ["12:34:56", "24:00:00Z", "12:60:00Z", "12:34:60Z", "12:34Z", "1:02:03Z", "12:34:56+2:00",
             "12:34:56.Z", "12:34:56+24:00"],
    "duration": ["P", "PT", "1D", "P1", "P1DT", "PT1H2", "P1D2W", "P1Y1Y", "PT1S1H", "P1M1Y", "P D", "PT1D"],
    "email": ["", "user", "user.example.com", "userexample.com"],
    "hostname": ["", "-example.com", "example-.com", "ex_ample.com", "example..com", ".example.com", "a" * 64,
                 "exa mple.com", "a" * 64 + ".com"],
    "ipv4": ["01.2.3.4", "1.2.3.04", "256.1.1.1", "1.2.3", "1.2.3.4.5", "1.2.3.", "1..2.3", "a.b.c.d",
             "1.2.3.4 ", "-1.2.3.4", "00.0.0.0", "1.2.3.256"],
    "ipv6": ["", ":", ":::", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "1::2::3", "12345::", "g::1",
             "1:2:3:4:5:6:7:8::", "::1.2.3.04", "::256.1.1.1", "fe80::1%eth0", "1::2:3:4:5:6:7:8", ":1::",
             "1.2.3.4::", "::1.2.3"],
    "uri": ["", "example.com", "/path", "//example.com", "1http://x", "http://a b", "http://[::1/", "ht tp://x",
            "http://x/%zz", "http://x/<>", "://x"],
    "uri-reference": ["http://a b", "a b", "%zz", "http://[::1/", "a:b c", "<x>", "\\\\share", "x#a#b"],
    "uuid": ["", "123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400",
             "123e4567-e89b-12d3-a456-4266141740000", "g23e4567-e89b-12d3-a456-426614174000",
             "{123e4567-e89b-12d3-a456-426614174000}", "urn:uuid:123e4567-e89b-12d3-a456-426614174000",
             "123e4567e-89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456_426614174000"],
}

# The checker accepts these; our languages leave them out (fsm/json_format.c).
LEFT_OUT = {
    # (The regexes of rfc3339-validator, fqdn and rfc3986-validator end in
    # Python's `$`, which also matches before a final newline.)
    "date-time": ["2024-01-31t12:34:56z", "2024-01-31T12:34:56z", "2024-01-31T12:34:56Z\n"],
    "date": [],
    "time": ["12:34:56z", "12:34:56Z\n"],
    "duration": ["+P1D", "-P1D", "P1.5D", "P1,5D", "P1E2D", "P1WT1H", "PT1.5S",
                 "P1Y2D", "PT1H5S"],  # RFC 3339 appendix A: only trailing units may be skipped
    "email": ["@", "user@localhost", '"quoted"@example.com', "user@[192.168.0.1]", "a@b@c", "üser@example.com",
              "user@-bad-.com", "@example.com"],
    "hostname": ["xn--bcher-kva.example", "a--b.example", "example.com.", "a" * 63 + "." + "b" * 10, ".".join(["abcdefghij"] * 10), "example.com\n"],
    "ipv4": [],
    "ipv6": [],
    "uri": ["https://example.com/\n", "http://[::1.2.3.04]/"],
    "uri-reference": ["\n", "a/b\n"],
    "uuid": ["12345678-1234-1234-1234-1234-5678-9abc", "12345678-1234-1234-1234-1234567890_1",
             "+2345678-1234-1234-1234-123456789abc", " 2345678-1234-1234-1234-123456789abc",
             "12345678-1234-1234-1234-1234urn:56789abc"],
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_typical_values(fmt):
    values = TYPICAL[fmt]
    assert len(values) >= 8
    assert [v for v in values if not conforms(v, fmt)] == [], "the list itself is wrong"
    missed = [v for v, ok in zip(values, ours(fmt, values)) if not ok]
    assert not missed, f"typical {fmt} values our language refuses: {missed}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_invalid_values(fmt):
    values = INVALID[fmt]
    assert [v for v in values if conforms(v, fmt)] == [], "the list itself is wrong"
    wrong = [v for v, ok in zip(values, ours(fmt, values)) if ok]
    assert not wrong, f"invalid {fmt} values our language accepts: {wrong}"


@pytest.mark.parametrize("fmt", [f for f in FORMATS if LEFT_OUT[f]])
def test_left_out_values(fmt):
    values = LEFT_OUT[fmt]
    assert [v for v in values if not conforms(v, fmt)] == [], "the checker refuses these; not a narrowing"
    wrong = [v for v, ok in zip(values, ours(fmt, values)) if ok]
    assert not wrong, f"now accepted (update fsm/json_format.c's top comment and this list): {wrong}"


# ---- differential: generated near misses ---------------------------------------

def pick(rng, xs):
    return xs[rng.randrange(len(xs))]


def num(rng, lo, hi, width):
    return str(rng.randint(lo, hi)).zfill(width)


def gen_date(rng):
    return f"{pick(rng, YEARS)}-{num(rng, 0, 13, 2)}-{num(rng, 0, 32, 2)}"


# Every year in some windows, every century, and some random years.
YEARS = sorted({f"{y:04d}" for y in [*range(0, 30), *range(1890, 2110), *range(9970, 10000),
                                     *range(0, 10000, 100), *random.Random(7).sample(range(10000), 200)]})


def gen_time(rng):
    frac = pick(rng, ["", "", ".0", "." + num(rng, 0, 999999, 6), ".", ".123456789012"])
    off = pick(rng, ["Z", "Z", "", "+", f"{pick(rng, '+-')}{num(rng, 0, 25, 2)}:{num(rng, 0, 61, 2)}",
                     f"+{num(rng, 0, 23, 2)}{num(rng, 0, 59, 2)}"])
    return f"{num(rng, 0, 25, 2)}:{num(rng, 0, 61, 2)}:{num(rng, 0, 61, 2)}{frac}{off}"


def gen_datetime(rng):
    return gen_date(rng) + pick(rng, ["T", "T", "T", " ", "_"]) + gen_time(rng)


def gen_octet(rng):
    if rng.random() < 0.8:
        return str(rng.randint(0, 255))
    return pick(rng, [str(rng.randint(250, 260)), "0" + str(rng.randint(0, 99)), "00", str(rng.randint(256, 999)),
                      "", "1a", " 1"])


def gen_ipv4(rng):
    return ".".join(gen_octet(rng) for _ in range(pick(rng, [4, 4, 4, 4, 3, 5])))


def gen_h16(rng):
    return "".join(pick(rng, "0123456789abcdefABCDEF") for _ in range(pick(rng, [1, 2, 3, 4, 4, 0, 5])))


def gen_ipv6(rng):
    n = rng.randint(0, 9)
    groups = [gen_h16(rng) for _ in range(n)]
    if rng.random() < 0.6:
        groups.insert(rng.randint(0, n), "")  # a "::" (or a stray empty group)
    s = ":".join(groups)
    if rng.random() < 0.25:
        s += pick(rng, [":", ""]) + gen_ipv4(rng)
    if s.startswith(":") and not s.startswith("::") and rng.random() < 0.8:
        s = ":" + s
    if s.endswith(":") and not s.endswith("::") and rng.random() < 0.8:
        s += ":"
    return s


URI_PIECES = ["http", "https", "a", "Z9", "x+y.z-", "1", ":", ":", "//", "/", "/", "?", "#", "@", "%20", "%2",
              "%zz", "[", "]", "::1", "[::1]", "[v1.x:y]", "[1::2:3]", "[::1.2.3.04]", "[fe80::1%25eth0]", "80",
              ".", "..", "-", "_", "~", "!", "$", "&", "'", "(", ")", "*", "+", ",", ";", "=", " ", "<", "\\",
              '"', "{", "|", "é", "example.com", "user:pw@", "a=b&c=d"]


def gen_uri(rng):
    s = "".join(pick(rng, URI_PIECES) for _ in range(rng.randint(0, 10)))
    if rng.random() < 0.5:
        s = pick(rng, ["http://", "https://", "urn:", "mailto:", "file:///", "//", "/", "", "a:"]) + s
    return s


HEX = "0123456789abcdefABCDEF"


def gen_uuid(rng):
    s = list("-".join("".join(pick(rng, HEX) for _ in range(k)) for k in (8, 4, 4, 4, 12)))
    for _ in range(pick(rng, [0, 0, 1, 1, 2])):
        i = rng.randrange(len(s) + 1)
        op, c = rng.randrange(3), pick(rng, "0aF-g_+ {}:")
        if op == 0 and i < len(s):
            s[i] = c
        elif op == 1:
            s.insert(i, c)
        elif i < len(s):
            del s[i]
    return "".join(s)


LABEL_CHARS = "abcXYZ019-_"


def gen_hostname(rng):
    labels = ["".join(pick(rng, LABEL_CHARS) for _ in range(pick(rng, [0, 1, 2, 5, 10, 30, 62, 63, 64])))
              for _ in range(rng.randint(1, 6))]
    return ".".join(labels) + pick(rng, ["", "", "", "."])


def gen_duration(rng):
    s = pick(rng, ["P", "P", "P", "+P", "-P", "", "p"])
    for part in ("Y", "M", "W", "D", "T", "H", "M", "S"):
        if rng.random() < 0.35:
            s += part if part == "T" else pick(rng, [str(rng.randint(0, 99)), "", "1.5", "0"]) + part
    if rng.random() < 0.1:
        s += str(rng.randint(0, 9))
    return s


def gen_email(rng):
    local = "".join(pick(rng, "ab.+_'!{-") for _ in range(rng.randint(0, 6)))
    domain = "".join(pick(rng, "ab.-9") for _ in range(rng.randint(0, 8)))
    return local + pick(rng, ["@", "@", "", "@@"]) + domain


ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
LDH = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
# RFC 3339 appendix A: units in order, only trailing ones may be skipped.
ISO_DURATION = re.compile(r"P(?:(?:\d+Y(?:\d+M(?:\d+D)?)?|\d+M(?:\d+D)?|\d+D)"
                          r"(?:T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S))?"
                          r"|T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S)|\d+W)", re.ASCII)

# (generator, candidates, which checker-valid strings our language covers)
DIFFERENTIAL = {
    "date": (gen_date, 40000, lambda s: True),
    "date-time": (gen_datetime, 40000, lambda s: True),  # generated with upper-case T and Z only
    "time": (gen_time, 40000, lambda s: True),
    "ipv4": (gen_ipv4, 40000, lambda s: True),
    "ipv6": (gen_ipv6, 60000, lambda s: True),
    "uri": (gen_uri, 40000, lambda s: not re.search(r"\[[^\]]*[:.]0[0-9]", s)),
    "uri-reference": (gen_uri, 40000, lambda s: not re.search(r"\[[^\]]*[:.]0[0-9]", s)),
    "uuid": (gen_uuid, 40000, lambda s: s.count("-") == 4 and set(s) <= set(HEX + "-")),
    "hostname": (gen_hostname, 40000, lambda s: len(s) <= 63 and not s.endswith(".") and "--" not in s),
    "duration": (gen_duration, 40000, lambda s: ISO_DURATION.fullmatch(s) is not None),
    "email": (gen_email, 40000,
              lambda s: re.fullmatch(rf"{ATEXT}+(?:\.{ATEXT}+)*@{LDH}(?:\.{LDH})+", s) is not None),
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_differential(fmt):
    gen, n, covered = DIFFERENTIAL[fmt]
    rng = random.Random(f"format-{fmt}")
    cands = sorted({gen(rng) for _ in range(n)})
    got = ours(fmt, cands)
    unsound = [s for s, ok in zip(cands, got) if ok and not conforms(s, fmt)]
    assert not unsound, f"our {fmt} accepts what the checker refuses: {unsound[:10]}"
    missed = [s for s, ok in zip(cands, got) if not ok and covered(s) and conforms(s, fmt)]
    assert not missed, f"our {fmt} refuses checker-valid values it should cover: {missed[:10]}"
    # Both verdicts must occur often, or the candidates test nothing.
    accepted = sum(got)
    assert accepted >= len(cands) // 50 and len(cands) - accepted >= len(cands) // 50, \
        f"{accepted} of {len(cands)} candidates accepted"


def test_length_boundaries():
    """The hostname cap and the date limits at their edges."""
    label = "a" * 63
    assert ours("hostname", [label, "a" * 64, "a" * 31 + "." + "b" * 31, "a" * 31 + "." + "b" * 32]) == \
        [True, False, True, False]
    assert ours("date", ["0001-01-01", "9999-12-31", "0000-12-31", "10000-01-01", "0400-02-29", "0100-02-29"]) == \
        [True, True, False, False, True, False]


def test_unit_test_lists_agree_with_checker():
    """tests/unit/test_json_format.c states the checker's verdict on its
    hand-picked values (valid, invalid, left out); hold it to that."""
    src = (ROOT / "tests" / "unit" / "test_json_format.c").read_text()
    table = src[src.index("static const format_case_t cases[]"):src.index("#define NCASES")]
    entry = re.compile(r'\{"([a-z0-9-]+)",\s*\{(.*?)NULL\},\s*\{(.*?)NULL\},\s*\{(.*?)NULL\}\}', re.S)
    literal = re.compile(r'"((?:[^"\\]|\\.)*)"')
    seen = set()
    for m in entry.finditer(table):
        fmt = m.group(1)
        valid, invalid, left_out = ([json.loads(f'"{t}"') for t in literal.findall(g)] for g in m.groups()[1:])
        assert [v for v in valid if not conforms(v, fmt)] == [], fmt
        assert [v for v in invalid if conforms(v, fmt)] == [], fmt
        assert [v for v in left_out if not conforms(v, fmt)] == [], fmt
        seen.add(fmt)
    assert seen == set(FORMATS)
