"""The C tokenizer against Hugging Face tokenizers, on the Llama 3 and Qwen3
tokenizer.json files of the shared data (make test-extended).

For each tokenizer: token ids identical on the generated corpus (>= 1 MB, see
make_corpus.py) and on every assigned code point in several contexts;
decode(encode(x)) equal to x after the tokenizer's normalizer (computed here
independently: NFC between added tokens for Qwen3); the streaming
detokenizer's output equal to Hugging Face's decode, also on random id
sequences that cut characters apart; every token's bytes equal to the
byte-level alphabet mapped back.
"""
import json
import random
import re
import unicodedata

import pytest
from tokenizers import Tokenizer

from tokhelpers import TOKENIZERS, json_lines, run_cli


def tokenizer_path(shared_data, name):
    p = shared_data / "tokenizers" / name / "tokenizer.json"
    if not p.is_file():
        pytest.fail("%s is missing" % p)
    return p


@pytest.fixture(scope="module", params=TOKENIZERS)
def tok(request, shared_data):
    path = tokenizer_path(shared_data, request.param)
    return request.param, str(path), Tokenizer.from_file(str(path)), json.loads(path.read_text())


def hf_ids(hf, recs, special_as_text=False):
    hf.encode_special_tokens = special_as_text
    try:
        return [e.ids for e in hf.encode_batch(recs, add_special_tokens=False)]
    finally:
        hf.encode_special_tokens = False


def our_ids(tok_cli, path, recs, *flags):
    return [[int(x) for x in l.split()] for l in run_cli(tok_cli, [path, *flags, "encode"], json_lines(recs))]


def compare(recs, want, got, what):
    assert len(want) == len(got) == len(recs)
    bad = [i for i in range(len(recs)) if want[i] != got[i]]
    msg = ["%s: %d of %d records differ" % (what, len(bad), len(recs))]
    for i in bad[:5]:
        msg.append("  %r\n    hf:  %s\n    ours: %s" % (recs[i][:120], want[i][:30], got[i][:30]))
    assert not bad, "\n".join(msg)
    size = sum(map(len, want))
    print("%s: %d records, %d %s, identical" % (what, len(recs), size,
                                                "tokens" if want and isinstance(want[0], list) else "characters"))


def test_encode_corpus(tok, tok_cli, corpus):
    name, path, hf, _ = tok
    compare(corpus, hf_ids(hf, corpus), our_ids(tok_cli, path, corpus), name + " corpus")


def test_encode_code_points(tok, tok_cli, code_points):
    name, path, hf, _ = tok
    compare(code_points, hf_ids(hf, code_points), our_ids(tok_cli, path, code_points),
            name + " code points")


def test_encode_special_as_text(tok, tok_cli, corpus):
    name, path, hf, _ = tok
    recs = [r for r in corpus if "<" in r]
    assert len(recs) > 100
    compare(recs, hf_ids(hf, recs, special_as_text=True),
            our_ids(tok_cli, path, recs, "--special-as-text"), name + " special tokens as text")


def normalized(spec, text):
    """text as the encoder sees it: the normalizer applied between the added
    tokens that are matched on raw text (Hugging Face's extract_and_normalize)."""
    norm = spec.get("normalizer")
    if not norm:
        return text
    assert norm["type"] == "NFC", norm
    raw = sorted((a["content"] for a in spec["added_tokens"] if not a.get("normalized", not a["special"])),
                 key=len, reverse=True)
    pat = re.compile("|".join(map(re.escape, raw)))
    out, pos = [], 0
    for m in pat.finditer(text):
        out.append(unicodedata.normalize("NFC", text[pos:m.start()]))
        out.append(m.group())
        pos = m.end()
    out.append(unicodedata.normalize("NFC", text[pos:]))
    return "".join(out)


def test_round_trip(tok, tok_cli, corpus):
    name, path, hf, spec = tok
    ids = our_ids(tok_cli, path, corpus)
    decoded = [json.loads(l) for l in run_cli(tok_cli, [path, "decode"], [" ".join(map(str, i)) for i in ids])]
    ours_norm = [json.loads(l) for l in run_cli(tok_cli, [path, "normalize"], json_lines(corpus))]
    want = [normalized(spec, r) for r in corpus]
    changed = sum(w != r for w, r in zip(want, corpus))
    compare(corpus, want, ours_norm, name + " normalize")
    compare(corpus, want, decoded, name + " decode(encode(x)) == normalize(x)")
    compare(corpus, [hf.decode(i, skip_special_tokens=False) for i in ids], decoded, name + " decode vs hf")
    print("%s: normalization changed %d records" % (name, changed))
    if spec.get("normalizer"):
        assert changed > 50  # the corpus does exercise NFC


def test_stream(tok, tok_cli, corpus):
    name, path, hf, _ = tok
    rng = random.Random(7)
    vocab = hf.get_vocab_size(with_added_tokens=True)
    # Tokens that are not whole UTF-8 on their own: pieces of characters.
    partial = [i for i in range(vocab)
               if hf.decode([i], skip_special_tokens=False).find("\ufffd") >= 0][:5000]
    assert len(partial) > 100
    seqs = [i for i in our_ids(tok_cli, path, corpus[:2000])]
    for _ in range(3000):
        seqs.append([rng.choice(partial) if rng.random() < 0.6 else rng.randrange(vocab)
                     for _ in range(rng.randint(1, 12))])
    lines = [" ".join(map(str, s)) for s in seqs]
    streamed = [json.loads(l) for l in run_cli(tok_cli, [path, "stream"], lines)]
    want = [hf.decode(s, skip_special_tokens=False) for s in seqs]
    compare(lines, want, streamed, name + " streaming detokenizer vs hf decode")


def byte_level_alphabet():
    """GPT-2's bytes_to_unicode, inverted: character -> byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def byte_level_bytes(token, inv):
    """A token's bytes as Hugging Face's ByteLevel decoder gives them."""
    if all(ch in inv for ch in token):
        return bytes(inv[ch] for ch in token)
    return token.encode()


def test_token_bytes(tok, tok_cli):
    name, path, hf, spec = tok
    ours = {}
    for line in run_cli(tok_cli, [path, "bytes"], []):
        i, h = line.split(" ") if " " in line else (line, "")
        ours[int(i)] = bytes.fromhex(h)
    vocab = hf.get_vocab(with_added_tokens=True)
    inv = byte_level_alphabet()
    want = {i: byte_level_bytes(t, inv) for t, i in vocab.items()}
    assert ours == want
    info = json.loads(run_cli(tok_cli, [path, "info"], [])[0])
    assert info["special"] == sum(a["special"] for a in spec["added_tokens"])
    assert info["size"] == len(want)
    if name == "llama3":
        assert (info["bos"], info["eos"], info["eot"]) == (128000, 128001, 128009)
    else:
        assert (info["bos"], info["eos"], info["eot"]) == (-1, 151643, 151645)
