#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/fuzz_gguf.c (fuzz/corpus/gguf/):

    python3 tests/tokenizer/gguf_seeds.py [OUT_DIR]

Small files (a few KB, under fuzz-smoke's -max_len) that reach every part
of the reader and of the GGUF vocabulary loader: every metadata type with
nested arrays and tensors; a byte-level ("gpt2") vocabulary with merges,
control and user-defined tokens for several pre-tokenizers; a
SentencePiece ("llama") vocabulary with scores and byte tokens; an empty
version-2 file.
"""
import pathlib
import struct
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gguf_io as G  # noqa: E402

BYTE_CHARS = [chr(c) for c in range(0x21, 0x7F)] + ["\u0120", "\u010a"]  # ASCII, Ġ (space), Ċ (newline)


def byte_level(pre):
    merges = ["Ġ t", "h e", "Ġt he", "l l", "e ll", "h ell", "hell o", "Ġ w", "o r", "Ġw or", "l d",
              "Ġwor ld", "1 2"]
    tokens = BYTE_CHARS + [m.replace(" ", "") for m in merges] + ["<|eot|>", "<s>", "<tool>"]
    types = [G.NORMAL] * (len(tokens) - 3) + [G.CONTROL, G.CONTROL, G.USER_DEFINED]
    return G.write(None, {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": (G.ARRAY, (G.INT32, types)),
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": (G.UINT32, len(tokens) - 2),
        "tokenizer.ggml.eos_token_id": (G.UINT32, len(tokens) - 3),
        "tokenizer.ggml.add_bos_token": False,
    })


def sentencepiece(prefix):
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in (0x0A, 0x20, 0xC3, 0xA9, 0xE4, 0xB8, 0xAD)]
    types = [G.UNKNOWN, G.CONTROL, G.CONTROL] + [G.BYTE] * 7
    words = ["\u2581", "a", "b", "c", "d", "e", "h", "l", "o", "r", "w", "ll", "he", "\u2581h", "\u2581he",
             "llo", "\u2581hello", "\u2581w", "or", "\u2581wor", "ld", "\u2581world", "ab", "bc", "abc"]
    scores = [0.0] * len(pieces) + [-100.0] * 11 + [-float(i) for i in range(1, len(words) - 10)]
    return G.write(None, {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": pieces + words,
        "tokenizer.ggml.scores": (G.ARRAY, (G.FLOAT32, scores)),
        "tokenizer.ggml.token_type": (G.ARRAY, (G.INT32, types + [G.NORMAL] * len(words))),
        "tokenizer.ggml.bos_token_id": (G.UINT32, 1),
        "tokenizer.ggml.eos_token_id": (G.UINT32, 2),
        "tokenizer.ggml.unknown_token_id": (G.UINT32, 0),
        "tokenizer.ggml.add_space_prefix": prefix,
    })


def all_types():
    f32 = struct.pack("<4f", 0.5, -1.0, 2.0, 3.25)
    return G.write(None, {
        "u8": (G.UINT8, 200), "i8": (G.INT8, -5), "u16": (G.UINT16, 65535), "i16": (G.INT16, -300),
        "u32": (G.UINT32, 4000000000), "i32": (G.INT32, -7), "f32": (G.FLOAT32, 1.5), "bool": True,
        "str": "h\u00e9llo", "u64": (G.UINT64, 1 << 63), "i64": (G.INT64, -(1 << 62)),
        "f64": (G.FLOAT64, 3.14159), "strs": ["a", "", "\u00e9t\u00e9"],
        "ints": (G.ARRAY, (G.INT16, [-1, 2, 300])), "bools": (G.ARRAY, (G.BOOL, [True, False])),
        "nested": (G.ARRAY, (G.ARRAY, [(G.INT8, [1, 2]), (G.STRING, ["x"]), (G.UINT8, [])])),
    }, tensors=[("t0", [4], 0, f32), ("blk.0.w", [32, 2], 8, bytes(68)), ("q4", [32], 2, bytes(18))],
        alignment=64)


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                       pathlib.Path(__file__).resolve().parents[2] / "fuzz" / "corpus" / "gguf")
    out.mkdir(parents=True, exist_ok=True)
    seeds = {
        "vocab-smollm": byte_level("smollm"),
        "vocab-llama-bpe": byte_level("llama-bpe"),
        "vocab-qwen2": byte_level("qwen2"),
        "vocab-spm": sentencepiece(True),
        "vocab-spm-noprefix": sentencepiece(False),
        "all-types": all_types(),
        "empty-v2": G.write(None, {}, version=2),
    }
    for name, blob in seeds.items():
        (out / name).write_bytes(blob)
        print("%s: %d bytes" % (name, len(blob)))


if __name__ == "__main__":
    main()
