#!/usr/bin/env python3
"""Writes fuzz/corpus/model: the seeds of fuzz/fuzz_model.c.

    .venv/bin/python fuzz/model_seeds.py [OUTDIR]

Tiny models (hidden 8, 2 heads of 4, one KV head, FFN 12, vocabulary 16, context 32) of every
architecture the loader knows, F32, without tokenizer metadata (the loader does not read it), in
the layout tests/fixtures/make_tiny_llama.py writes: llama (2 layers), qwen2 (with Q/K/V
biases), qwen3 (Q/K norms), gemma3 (6 layers: five sliding-window layers and a global one) and
gemma3 with linear RoPE scaling. A few KB each, so that libFuzzer's mutations stay cheap."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

import make_tiny_llama as mt  # noqa: E402

SMALL = dict(hidden=8, heads=2, kv_heads=1, head_dim=4, ffn=12, vocab=16, context=32)


def main(argv):
    out = pathlib.Path(argv[1]) if len(argv) > 1 else ROOT / "fuzz" / "corpus" / "model"
    out.mkdir(parents=True, exist_ok=True)
    for name, arch, factor in [("llama", "llama", None), ("qwen2", "qwen2", None), ("qwen3", "qwen3", None),
                               ("gemma3", "gemma3", None), ("gemma3-rope8", "gemma3", 8.0)]:
        cfg = mt.make_config(arch, rope_factor=factor)
        cfg.update(SMALL)
        if arch == "gemma3":
            cfg.update(window=3, query_pre_attn_scalar=SMALL["head_dim"])
        else:
            cfg["layers"] = 2
        mt.write_gguf(out / name, cfg, mt.make_weights(cfg), tokenizer=False)
        print(out / name, (out / name).stat().st_size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
