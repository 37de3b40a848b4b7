"""src/tokenizer/nfc.c against Python's unicodedata (the version the tables
were generated from): the parity corpus, every assigned code point in
several contexts, and composition/reordering cases. Needs only tok_cli."""
import json
import random
import unicodedata

from tokhelpers import json_lines, run_cli
import make_corpus


def check(tok_cli, recs, what):
    got = [json.loads(l) for l in run_cli(tok_cli, ["nfc"], json_lines(recs))]
    want = [unicodedata.normalize("NFC", r) for r in recs]
    bad = [i for i in range(len(recs)) if got[i] != want[i]]
    assert not bad, "%s: %d of %d differ, first %r -> %r, want %r" % (
        what, len(bad), len(recs), recs[bad[0]][:80], got[bad[0]][:80], want[bad[0]][:80])
    print("%s: %d records agree (%d changed by NFC)" % (what, len(recs),
                                                       sum(w != r for w, r in zip(want, recs))))


def test_nfc_corpus(tok_cli, corpus):
    check(tok_cli, corpus, "corpus")


def test_nfc_code_points(tok_cli):
    marks = [chr(c) for c in range(0x300, 0x370)] + ["\u0591", "\u05b0", "\u093c", "\u0f71", "\u3099"]
    recs, cur = [], []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or not make_corpus.assigned(cp):
            continue
        c = chr(cp)
        # c alone, after a base, before marks in and out of canonical order.
        cur.append(c + " a" + c + " " + c + "\u0323\u0301 " + c + "\u0301\u0323 \u1100" + c + "\u11a8")
        if len(cur) == 64:
            recs.append("|".join(cur))
            cur = []
    recs.append("|".join(cur))
    rng = random.Random(3)
    for _ in range(20000):
        recs.append("".join(rng.choice(marks + list("aeoAEO \u1100\u1161\u11a8\uac00"))
                            for _ in range(rng.randint(1, 10))))
    check(tok_cli, recs, "code points")
