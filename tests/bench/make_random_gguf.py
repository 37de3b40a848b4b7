#!/usr/bin/env python3
"""make_random_gguf.py — a ~0.5B-class model with random weights, for CPU speed comparisons.

    .venv/bin/python tests/bench/make_random_gguf.py OUT.gguf [--type q4_0|q8_0|q4_1|q4_k_m]
        [--shape qwen2-0.5b|qwen3-0.6b] [--seed N]

Writes a GGUF of architecture qwen2 in the shape of Qwen2.5-0.5B (hidden 896, 24 layers, 14 query
heads and 2 KV heads of 64, FFN 4864, RoPE theta 1e6, Q/K/V biases, tied embeddings) with the
Qwen3 tokenizer of ../shared/data/tokenizers/qwen3 (so llama.cpp and sieve read the same
vocabulary, and the embedding has one row per token). The weights are random (normal, scaled by
1/sqrt(fan_in), norms 1): the text is noise, but every matrix has the real model's size, so speed
is what a real file of that shape and type would give. Matrices are quantized with the gguf
package's own quantizer to --type (default q4_0); the embedding is Q8_0, norms and biases F32.
Both sieve and llama.cpp read all of these types.

--shape qwen3-0.6b is Qwen3-0.6B's shape instead (architecture qwen3: hidden 1024, 28 layers, 16
query heads and 8 KV heads of 128, per-head Q/K norms, FFN 3072, no biases, tied embeddings), whose
rows are multiples of 256, as the K formats need. --type q4_k_m mixes formats the way llama.cpp's
Q4_K_M does: Q6_K for the (tied) embedding, and for attn_v and ffn_down in the first and last
eighth of the layers and every third layer between; Q4_K for the other matrices (quantized by
tests/fixtures/kquant.py, round to nearest).

Used by the second model row of BENCHMARKS.md ("Integer kernels"):
    .venv/bin/python tests/bench/make_random_gguf.py /tmp/rand-0.5b-q4_0.gguf
    .venv-llamacpp-noamx/bin/python tests/bench/bench_cpu_model.py --model /tmp/rand-0.5b-q4_0.gguf ...
"""
import argparse
import json
import pathlib
import sys

import numpy as np

import gguf

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "fixtures")]
import kquant  # noqa: E402  (the K formats; the others through gguf.quants)
import make_tiny_llama  # noqa: E402  (add_shape: the GGUF shape keys)

TOKENIZER = ROOT / ".." / "shared" / "data" / "tokenizers" / "qwen3" / "tokenizer.json"

SHAPES = {
    "qwen2-0.5b": {"arch": "qwen2", "hidden": 896, "layers": 24, "heads": 14, "kv_heads": 2, "head_dim": 64,
                   "ffn": 4864, "context": 4096, "theta": 1000000.0, "eps": 1e-6},
    "qwen3-0.6b": {"arch": "qwen3", "hidden": 1024, "layers": 28, "heads": 16, "kv_heads": 8, "head_dim": 128,
                   "ffn": 3072, "context": 4096, "theta": 1000000.0, "eps": 1e-6},
}


def vocabulary(path):
    """(tokens, types, merges, eos id) from a Hugging Face byte-level BPE tokenizer.json."""
    tj = json.loads(pathlib.Path(path).read_text())
    by_id = {i: t for t, i in tj["model"]["vocab"].items()}
    special = {}
    for a in tj.get("added_tokens", []):
        by_id[a["id"]] = a["content"]
        special[a["id"]] = a.get("special", False)
    n = max(by_id) + 1
    tokens = [by_id.get(i, "[PAD%d]" % i) for i in range(n)]
    types = [3 if special.get(i) else (4 if i in special else 1) for i in range(n)]
    for i in range(n):
        if i not in by_id:
            types[i] = 5  # unused
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    eos = next((a["id"] for a in tj.get("added_tokens", []) if a["content"] == "<|endoftext|>"), n - 1)
    return tokens, types, merges, eos


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--type", choices=("q4_0", "q8_0", "q4_1", "q4_k_m"), default="q4_0")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen2-0.5b")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    Q = gguf.GGMLQuantizationType
    qt = {"q4_0": Q.Q4_0, "q8_0": Q.Q8_0, "q4_1": Q.Q4_1, "q4_k_m": Q.Q4_K}[a.type]
    tokens, types, merges, eos = vocabulary(TOKENIZER)
    s = SHAPES[a.shape]
    n_layers = s["layers"]

    def more_bits(i):  # llama.cpp's use_more_bits: Q6_K instead of Q4_K under Q4_K_M
        return i < n_layers // 8 or i >= 7 * n_layers // 8 or (i - n_layers // 8) % 3 == 2
    h, hd, f, v = s["hidden"], s["head_dim"], s["ffn"], len(tokens)
    nq, nkv = s["heads"] * hd, s["kv_heads"] * hd
    rng = np.random.default_rng(a.seed)

    def normal(shape, std):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    arch = s["arch"]
    wr = gguf.GGUFWriter(a.out, arch)
    wr.add_name("sieve random %s-shape %s" % (a.shape, a.type))
    make_tiny_llama.add_shape(wr, arch, dict(s, vocab=v))
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("qwen2")
    wr.add_token_list(tokens)
    wr.add_token_types(types)
    wr.add_token_merges(merges)
    wr.add_eos_token_id(eos)
    wr.add_add_bos_token(False)

    def mat(name, rows, cols, std, t=qt):
        x = normal((rows, cols), std)
        wr.add_tensor(name, kquant.quantize(x, t), raw_shape=gguf.quant_shape_to_byte_shape(x.shape, t),
                      raw_dtype=t)

    def vec(name, n, mean, std):
        wr.add_tensor(name, (np.float32(mean) + normal((n,), std)).astype(np.float32))

    kmix = a.type == "q4_k_m"
    mat("token_embd.weight", v, h, 1.0, Q.Q6_K if kmix else Q.Q8_0)
    for i in range(n_layers):
        b = "blk.%d." % i
        big = Q.Q6_K if kmix and more_bits(i) else qt
        vec(b + "attn_norm.weight", h, 1.0, 0.0)
        mat(b + "attn_q.weight", nq, h, h ** -0.5)
        mat(b + "attn_k.weight", nkv, h, h ** -0.5)
        mat(b + "attn_v.weight", nkv, h, h ** -0.5, big)
        if arch == "qwen2":
            vec(b + "attn_q.bias", nq, 0.0, 0.1)
            vec(b + "attn_k.bias", nkv, 0.0, 0.1)
            vec(b + "attn_v.bias", nkv, 0.0, 0.1)
        else:
            vec(b + "attn_q_norm.weight", hd, 1.0, 0.0)
            vec(b + "attn_k_norm.weight", hd, 1.0, 0.0)
        mat(b + "attn_output.weight", h, nq, nq ** -0.5)
        vec(b + "ffn_norm.weight", h, 1.0, 0.0)
        mat(b + "ffn_gate.weight", f, h, h ** -0.5)
        mat(b + "ffn_up.weight", f, h, h ** -0.5)
        mat(b + "ffn_down.weight", h, f, f ** -0.5, big)
    vec("output_norm.weight", h, 1.0, 0.0)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
