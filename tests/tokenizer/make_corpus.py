#!/usr/bin/env python3
"""Writes the tokenizer parity corpus: deterministic, at least 1 MB.

One record per line, each a JSON string (records contain newlines):

    python3 tests/tokenizer/make_corpus.py [--seed N] [--min-bytes N] > corpus.jsonl

The records cover what a tokenizer meets in prompts and in constrained
output: English prose with contractions in every case, code with tabs and
indentation, JSON as Python writes it (compact, spaced, indented), numbers,
whitespace runs (spaces, tabs, CR/LF, Unicode spaces), CJK, Hangul, emoji
(skin tones, ZWJ families, flags, keycaps), combining marks in and out of
canonical order, lone combining marks, composition exclusions, RTL text
with direction marks, strings that look like special tokens, random
assigned code points of every plane, and long runs.

Characters are drawn only among those assigned in this Python's Unicode
version (unicodedata), and U+1DF6 is left out: see src/tokenizer/nfc.h and
pretok.c for why newer characters may tokenize differently.
"""
import argparse
import json
import random
import sys
import unicodedata

WORDS = (
    "the of and to in is was he for it with as his on be at by had are but from or have an they "
    "which one you were all her she there would their we him been has when who will no more if out "
    "so up said what its about than into them can only other time new some could these two may "
    "first then do any like my now over such our man me even most made after also did many off "
    "before must well back through years much where your way down should because each just those "
    "people how too little state good very make world still see own men work long here get both "
    "between life being under never day same another know while last might us great old year come "
    "since against go came right used take three tokenizer constraint schema automaton byte merge "
    "rank vocabulary inference server latency throughput Kubernetes naïve café résumé coöperate "
    "façade jalapeño Zürich São Paulo Ærøskøbing straße ÉCOLE Ångström"
).split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M",
                "'LL", "'D", "'Ll", "’s", "’t", "'x", "'"]
SPECIAL_LIKE = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|eom_id|>", "<|start_header_id|>",
    "<|end_header_id|>", "<|reserved_special_token_5|>", "<|reserved_special_token_250|>",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<think>",
    "</think>", "<|fim_prefix|>", "<|vision_start|>", "<|eot_id", "|eot_id|>", "<|eot_id|",
    "< |eot_id|>", "<|EOT_ID|>", "<s>", "</s>", "<unk>", "<|im_end|>\u0338", "<|", "|>",
]
UNICODE_SPACES = ["\u00a0", "\u1680", "\u2000", "\u2003", "\u2009", "\u200a", "\u2028", "\u2029",
                  "\u202f", "\u205f", "\u3000", "\u0085", "\u180e", "\u200b", "\ufeff", "\x0b",
                  "\x0c", "\r", "\r\n", "\t", "\n"]
EMOJI = ["😀", "🤖", "👍", "👍🏽", "👍🏿", "❤️", "❤", "✨", "🔥", "🎉", "🇺🇸", "🇯🇵", "🇪🇺", "1️⃣",
         "#️⃣", "👨‍👩‍👧‍👦", "👩‍💻", "🧑🏾‍🚀", "🏳️‍🌈", "🏴‍☠️", "👁️‍🗨️", "🫠", "🦀", "🐍", "☕",
         "©️", "™", "🀄", "🃏", "⌚", "🈚", "🆗"]
CJK_RANGES = [(0x4E00, 0x9FFF), (0x3040, 0x309F), (0x30A0, 0x30FF), (0xAC00, 0xD7A3),
              (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0xFF00, 0xFFEF), (0x3000, 0x303F)]
COMBINING = ["\u0301", "\u0300", "\u0308", "\u0323", "\u0327", "\u030a", "\u0338", "\u0345",
             "\u0313", "\u0342", "\u05b4", "\u0651", "\u064e", "\u093c", "\u0951", "\u20d7",
             "\u302a", "\u3099", "\u309a", "\u0e48", "\u1ab0", "\ufe20"]
NFC_CASES = [
    "e\u0301", "E\u0301", "a\u0308", "o\u0302\u0301", "u\u031b\u0303", "A\u030a", "\u212b", "\u2126",
    "\u1e0b\u0323", "d\u0307\u0323", "d\u0323\u0307", "q\u0307\u0323", "\u0958", "\u0915\u093c",
    "\u1100\u1161", "\u1100\u1161\u11a8", "\uac00\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af",
    "\u0344", "\u0340", "\u0374", "\u037e", "\u0387", "\u00c5", "A\u0328\u0301", "\u0b47\u0b3e",
    "\u0bc6\u0bbe", "\u0d46\u0d3e", "\u1025\u102e", "\u30ab\u3099", "\u304b\u3099", "\uff76\uff9e",
    "\u2260", "=\u0338", "<\u0338", ">\u0338", "\u0041\u0301\u0302\u0303\u0304", "e\u0301\u0301",
    "\u0301", " \u0301", "\n\u0301x", "\u05d0\u05b7", "\ufb2c", "\U0001d15e", "\U0001d160",
    "\u1f80", "\u03b1\u0313\u0300\u0345", "\u0390", "\u1fee", "\u2adc", "\u0f73", "\u0f77",
]
RTL = ["مرحبا بالعالم", "السلام عليكم ورحمة الله", "שלום עולם", "עִבְרִית", "العربية ١٢٣٤٥",
       "\u200fשלום\u200e abc", "\u202bمتن\u202c", "فارسی ۱۲۳", "اردو زبان", "ܫܠܡܐ"]
CODE = [
    "def f(x):\n    return x ** 2 + 1\n",
    "for (int i = 0; i < n; i++) {\n\tsum += a[i] * b[i];\n}\n",
    "if __name__ == \"__main__\":\n    main()\n",
    "const fn = async (a, b) => { await sleep(10); return a?.b ?? null; };\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;\n",
    "    \t  mixed_indent = [1,2,3]  \n\t\t\tdeeper()\n",
    "fn main() -> Result<(), Box<dyn Error>> {\n    let v: Vec<u8> = vec![0xFF; 16];\n    Ok(())\n}\n",
    "x=>x&&y||!z;a<<=2;b>>>=1;c!==d;e**=f;g//=h;i:=j\n",
    "<div class=\"a\"><span>&nbsp;&amp;</span></div>\n",
    "$ curl -s http://localhost:8080/v1/chat/completions -H 'Content-Type: application/json'\n",
    "regex = r\"^[a-z0-9_.+-]+@[a-z0-9-]+\\.[a-z0-9-.]+$\"\n",
    "    }\n  }\n}\n\n\n",
    "class Foo(Bar):\n    \"\"\"Docstring.\"\"\"\n\n    def __init__(self):\n        super().__init__()\n",
]


def assigned(cp):
    c = chr(cp)
    return unicodedata.category(c) not in ("Cn", "Cs") and cp != 0x1DF6


def rand_char(rng, lo, hi):
    while True:
        cp = rng.randint(lo, hi)
        if assigned(cp):
            return chr(cp)


def prose(rng):
    out = []
    for _ in range(rng.randint(5, 60)):
        w = rng.choice(WORDS)
        r = rng.random()
        if r < 0.1:
            w = w.capitalize()
        elif r < 0.13:
            w = w.upper()
        if rng.random() < 0.08:
            w += rng.choice(CONTRACTIONS)
        out.append(w)
        if rng.random() < 0.12:
            out[-1] += rng.choice([",", ".", ";", ":", "!", "?", "...", " -", " —", "\"", ")"])
    s = " ".join(out)
    if rng.random() < 0.3:
        s = s[0].upper() + s[1:] + "."
    return s


def json_value(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        k = rng.randrange(7)
        if k == 0:
            return rng.randint(-10**12, 10**12)
        if k == 1:
            return rng.uniform(-1e6, 1e6)
        if k == 2:
            return rng.choice([0.1, 1e-7, 1e21, -0.0, 3.14159, 2.5e-300, 100.0])
        if k == 3:
            return rng.choice([True, False, None])
        if k == 4:
            return prose(rng)[: rng.randint(0, 40)]
        if k == 5:
            return "".join(rng.choice(["\"", "\\", "/", "\b", "\n", "\t", "é", "中", "😀", "\x00", "\x1f"])
                           for _ in range(rng.randint(1, 8)))
        return rng.choice(WORDS)
    if r < 0.65:
        return {rng.choice(WORDS) + rng.choice(["", "_id", "Name", "_at", "2"]): json_value(rng, depth + 1)
                for _ in range(rng.randint(0, 5))}
    return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]


def json_text(rng):
    v = json_value(rng)
    k = rng.randrange(4)
    if k == 0:
        return json.dumps(v, ensure_ascii=False)
    if k == 1:
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    if k == 2:
        return json.dumps(v, indent=2, ensure_ascii=False)
    return json.dumps(v)  # ASCII with \u escapes


def numbers(rng):
    parts = []
    for _ in range(rng.randint(3, 15)):
        k = rng.randrange(8)
        if k == 0:
            parts.append(str(rng.randint(0, 10**rng.randint(1, 30))))
        elif k == 1:
            parts.append("%.*f" % (rng.randint(0, 8), rng.uniform(-1e5, 1e5)))
        elif k == 2:
            parts.append("{:,}".format(rng.randint(0, 10**12)))
        elif k == 3:
            parts.append("%d-%02d-%02dT%02d:%02d:%02dZ" % (rng.randint(1900, 2100), rng.randint(1, 12),
                                                          rng.randint(1, 28), rng.randint(0, 23),
                                                          rng.randint(0, 59), rng.randint(0, 59)))
        elif k == 4:
            parts.append("+1 (%03d) %03d-%04d" % (rng.randint(0, 999), rng.randint(0, 999), rng.randint(0, 9999)))
        elif k == 5:
            parts.append("%ge%d" % (rng.random(), rng.randint(-300, 300)))
        elif k == 6:
            parts.append("".join(rng.choice("٠١٢٣٤٥٦٧٨٩०१२३४५६७८९０１２３４½¾²³ⅣⅫ") for _ in range(rng.randint(1, 9))))
        else:
            parts.append("0x%X" % rng.getrandbits(rng.randint(4, 64)))
    return rng.choice([" ", "", ", ", "\n", "\t"]).join(parts)


def whitespace(rng):
    out = []
    for _ in range(rng.randint(3, 20)):
        k = rng.randrange(5)
        if k == 0:
            out.append(" " * rng.randint(1, 40))
        elif k == 1:
            out.append("".join(rng.choice(UNICODE_SPACES) for _ in range(rng.randint(1, 6))))
        elif k == 2:
            out.append(rng.choice(["\n", "\r\n", "\n\n", "\t", "\t\t", " \n", "\n ", "  \n\n  "]))
        else:
            out.append(rng.choice(WORDS) + rng.choice(["", ".", "!", "'s", "123"]))
    return "".join(out)


def cjk(rng):
    out = []
    for _ in range(rng.randint(5, 80)):
        lo, hi = rng.choice(CJK_RANGES)
        out.append(rand_char(rng, lo, hi))
        if rng.random() < 0.1:
            out.append(rng.choice(["，", "。", "、", "！", "？", " ", "「", "」", "123", "ABC", "\n"]))
    return "".join(out)


def emoji(rng):
    out = []
    for _ in range(rng.randint(1, 25)):
        out.append(rng.choice(EMOJI))
        if rng.random() < 0.3:
            out.append(rng.choice([" ", "", "!", "a", "\u200d", "\ufe0f", "\U0001f3fb"]))
    return "".join(out)


def combining(rng):
    out = []
    for _ in range(rng.randint(2, 20)):
        r = rng.random()
        if r < 0.4:
            out.append(rng.choice(NFC_CASES))
        elif r < 0.7:
            out.append(rng.choice("aeiouAEIOUnNcCsSzZ ") +
                       "".join(rng.choice(COMBINING) for _ in range(rng.randint(1, 4))))
        else:
            out.append(rng.choice(WORDS))
        out.append(rng.choice(["", " ", "", "\n"]))
    return "".join(out)


def random_unicode(rng):
    out = []
    for _ in range(rng.randint(1, 60)):
        r = rng.random()
        if r < 0.5:
            out.append(rand_char(rng, 0x20, 0x2FFF))
        elif r < 0.8:
            out.append(rand_char(rng, 0x3000, 0xFFFF))
        else:
            out.append(rand_char(rng, 0x10000, 0x10FFFF))
        if rng.random() < 0.2:
            out.append(" ")
    return "".join(out)


def odd_chars(rng):
    picks = ["\x00", "\x01", "\x7f", "\x80", "\x9f", "\u00ad", "\u200c", "\u200d", "\u2060",
             "\ufffd", "\ufffe", "\uffff", "\ufdd0", "\U0010ffff", "\U000e0001", "\U000e0041",
             "\ue000", "\U000f0000", "\u034f", "\u061c", "\u2066", "\u2069", "\U0001f3fb"]
    return "".join(rng.choice(picks + [" ", "a", "1", "'s"]) for _ in range(rng.randint(1, 30)))


def special_like(rng):
    out = []
    for _ in range(rng.randint(1, 12)):
        out.append(rng.choice(SPECIAL_LIKE))
        out.append(rng.choice(["", " ", "\n", "x", "Hello", " world", "'s", "\u0301", "123", "<", ">"]))
    return "".join(out)


def long_runs(rng):
    k = rng.randrange(8)
    n = rng.randint(50, 3000)
    if k == 0:
        return " " * n + "x"
    if k == 1:
        return "a" * n
    if k == 2:
        return "".join(rng.choice("0123456789") for _ in range(n))
    if k == 3:
        return "\n" * (n // 10) + "end"
    if k == 4:
        return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                       for _ in range(n)) + "=="
    if k == 5:
        return "https://example.com/" + "/".join(rng.choice(WORDS) for _ in range(n // 20)) + "?q=1&r=%20"
    if k == 6:
        return "!" * (n // 5) + "?" * (n // 7) + "." * (n // 3)
    return "\t " * (n // 4) + "\u3000" * 10


def mashup(rng):
    gens = [prose, json_text, numbers, whitespace, cjk, emoji, combining, random_unicode, odd_chars,
            special_like]
    return rng.choice(["", " ", "\n"]).join(rng.choice(gens)(rng)[:200] for _ in range(rng.randint(2, 6)))


GENERATORS = [
    (prose, 12), (lambda r: rng_code(r), 6), (json_text, 10), (numbers, 6), (whitespace, 8),
    (cjk, 6), (emoji, 5), (combining, 8), (lambda r: r.choice(RTL) + " " + prose(r)[:60], 3),
    (random_unicode, 6), (odd_chars, 3), (special_like, 5), (long_runs, 2), (mashup, 10),
]


def rng_code(rng):
    return "".join(rng.choice(CODE) for _ in range(rng.randint(1, 4)))


def fixed_records():
    """Hand-picked records that every run includes."""
    recs = ["", " ", "a", "\n", "  ", "\t", "'s", "'S", "I'M", "don't", "DON'T", "it’s",
            "Hello world", " Hello", "Hello ", "hello  world", "x\n\n\ny", "a \n b", "123456789",
            "1234 5678", "3.14159", "-0.5e-10", "naïve café", "e\u0301", "\u212b", "<|eot_id|>",
            "<|eot_id|><|eot_id|>", "a<|eot_id|>b", " <|im_end|> ", "<|im_end|>\u0338",
            "<|endoftext|>", "\u0301\u0301", "👨‍👩‍👧‍👦", "🇺🇸🇯🇵", "  \u00a0 ", "\u3000x",
            "\u180e", "a\u180eb", " \u180e ", "\u0085", "x\u2028y", "\r\n\r\n", "{\"a\": [1, 2]}"]
    recs += NFC_CASES + SPECIAL_LIKE + RTL + EMOJI + UNICODE_SPACES + CODE
    return recs


def generate(seed=20260101, min_bytes=1 << 20):
    rng = random.Random(seed)
    recs = fixed_records()
    total = sum(len(r.encode()) for r in recs)
    gens = [g for g, w in GENERATORS for _ in range(w)]
    while total < min_bytes:
        r = rng.choice(gens)(rng)
        recs.append(r)
        total += len(r.encode())
    return recs


def code_point_records(per_record=48):
    """Every assigned scalar value (see above), each in a few contexts: alone,
    doubled, after a space, a letter and a digit, before a contraction."""
    recs, cur = [], []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or not assigned(cp):
            continue
        c = chr(cp)
        cur.append("%s%s %sa%s1%s's\n" % (c, c, c, c, c))
        if len(cur) == per_record:
            recs.append("".join(cur))
            cur = []
    if cur:
        recs.append("".join(cur))
    return recs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=20260101)
    ap.add_argument("--min-bytes", type=int, default=1 << 20)
    ap.add_argument("--code-points", action="store_true",
                    help="write the every-code-point records instead")
    args = ap.parse_args()
    recs = code_point_records() if args.code_points else generate(args.seed, args.min_bytes)
    out = sys.stdout
    for r in recs:
        out.write(json.dumps(r, ensure_ascii=False) + "\n")
    print("make_corpus: %d records, %d bytes of text" % (len(recs), sum(len(r.encode()) for r in recs)),
          file=sys.stderr)


if __name__ == "__main__":
    main()
