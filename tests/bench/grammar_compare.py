#!/usr/bin/env python3
"""Grammars side by side: sieve and llguidance, TTFM and time between
masks on random token walks, same tokenizer, same machine, one process each.

    .venv-peers/bin/python tests/bench/grammar_compare.py \\
        --sieve-bench build-rel/tests/bench/bench_grammar_masks \\
        --tokenizer ../shared/data/tokenizers/llama3/tokenizer.json \\
        tests/data/gbnf/*.gbnf

sieve: tests/bench/bench_grammar_masks (compile, token index, the start's
mask; then WALKS walks of STEPS tokens, each mask timed). llguidance: its own
GBNF-to-Lark converter (llguidance.gbnf_to_lark), an LLMatcher (TTFM: the
matcher and its first mask), then the same walks: each fill_next_token_bitmask
timed, a random allowed token (EOS only when nothing else is) consumed. The
walks differ (each engine's own random choices), the grammars and the
tokenizer do not. A FILE.lark is Lark-style EBNF, given to both as it is
(sieve tells the formats apart by `::=`, fsm/grammar.h). Needs the peers' venv (tests/bench/peers/setup.sh)."""
import argparse
import json
import pathlib
import random
import subprocess
import time


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))] if v else float("nan")


def llg_run(tok, eos, text, walks, steps, is_lark):
    import llguidance
    import numpy as np
    from llguidance.gbnf_to_lark import gbnf_to_lark
    from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

    try:
        lark = text if is_lark else gbnf_to_lark(text)
    except Exception as e:  # noqa: BLE001 - the converter's own refusal
        return {"error": f"gbnf_to_lark: {e}"}
    grammar = json.dumps({"grammars": [{"lark_grammar": lark}]})
    mask = allocate_token_bitmask(1, tok.vocab_size)
    t0 = time.perf_counter_ns()
    m = llguidance.LLMatcher(tok, grammar)
    if m.is_error():
        return {"error": m.get_error()}
    fill_next_token_bitmask(m, mask, 0)
    ttfm = (time.perf_counter_ns() - t0) / 1e6
    if m.is_error():
        return {"error": m.get_error()}
    rng = random.Random(42)
    ts = []
    for _ in range(walks):
        w = llguidance.LLMatcher(tok, grammar)
        for _ in range(steps):
            if w.is_stopped():
                break
            a = time.perf_counter_ns()
            fill_next_token_bitmask(w, mask, 0)
            ts.append((time.perf_counter_ns() - a) / 1e3)
            bits = np.unpackbits(mask[0].view(np.uint8), bitorder="little")[: tok.vocab_size]
            allowed = [int(i) for i in np.flatnonzero(bits) if int(i) != eos]
            if not allowed:
                break
            if not w.consume_token(rng.choice(allowed)):
                return {"error": "an allowed token was refused"}
    return {"ttfm_ms": ttfm, "masks": len(ts),
            "tbm_us": {"p50": pct(ts, .5), "p90": pct(ts, .9), "p99": pct(ts, .99), "max": max(ts)}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sieve-bench", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--walks", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("grammars", nargs="+")
    a = ap.parse_args()
    import llguidance.hf
    from transformers import PreTrainedTokenizerFast
    hf = PreTrainedTokenizerFast(tokenizer_file=a.tokenizer)
    cfg = pathlib.Path(a.tokenizer).with_name("tokenizer_config.json")
    eos_tok = json.loads(cfg.read_text()).get("eos_token") if cfg.exists() else None
    if isinstance(eos_tok, dict):
        eos_tok = eos_tok.get("content")
    eos = hf.convert_tokens_to_ids(eos_tok) if eos_tok else hf.vocab_size - 1
    tok = llguidance.hf.from_tokenizer(hf, eos_token=eos)
    print("| grammar | engine | TTFM ms | masks | TBM p50 µs | p99 µs | max µs |")
    print("|:--|:--|--:|--:|--:|--:|--:|")
    for g in a.grammars:
        name = pathlib.Path(g).stem + (" (Lark)" if g.endswith(".lark") else "")
        r = subprocess.run([a.sieve_bench, a.tokenizer, "gbnf:" + g, str(a.walks), str(a.steps)],
                           capture_output=True, text=True)
        s = json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr.strip()[:80]}
        ll = llg_run(tok, eos, pathlib.Path(g).read_text(), a.walks, a.steps, g.endswith(".lark"))
        for eng, x in (("sieve", s), ("llguidance", ll)):
            if "error" in x:
                why = " ".join(x["error"].split())[:70]
                print(f"| {name} | {eng} | refused: {why} | | | | |")
            else:
                t = x["tbm_us"]
                print(f"| {name} | {eng} | {x['ttfm_ms']:.3f} | {x['masks']} | {t['p50']:.2f} | {t['p99']:.2f} | "
                      f"{t['max']:.1f} |")


if __name__ == "__main__":
    main()
