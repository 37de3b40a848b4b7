#!/usr/bin/env python3
"""engine_bench.py — constrained against unconstrained decoding through the
engine (`sieve generate --batch`), issue 20's throughput target.

    engine_bench.py --sieve BIN --model DIR --schemas DIR [--requests 256]
                    [--max-num-seqs 64] [--max-tokens 96] [--device cuda]
                    [--extra "ARGS"] [--out FILE]

Runs the same prompts twice, each line at temperature 1 with its own seed:
once unconstrained, once with the schemas of DIR in turn (every schema file but
big_integers.json, sorted), with --max-num-seqs rows running. Compiles happen before the
clock starts (cmd_generate_batch.c), so the figures are decode: completion
tokens a second, as the CLI's summary reports them (forced tokens count:
jump-forward's gain), and time a step (a step's rows differ: constrained
requests finish sooner, so more of their steps carry prefills), and the
ratios of both. Every
constrained output must parse as JSON (an output a budget cut is closed
valid); any error line fails the run. Python's standard library only: the
GPU machine has nothing else.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

SUMMARY = re.compile(r"(\d+) prompt \+ (\d+) completion tokens in ([0-9.]+) s \(([0-9.]+) tokens/s\); "
                     r"(\d+) steps, at most (\d+) running")


def run(args, lines, tag, tmp):
    path = os.path.join(tmp, tag + ".jsonl")
    with open(path, "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\n")
    stats = os.path.join(tmp, tag + ".stats.json")
    cmd = [args.sieve, "generate", "--batch", path, "-m", args.model, "--max-num-seqs",
           str(args.max_num_seqs), "--device", args.device, "--stats", stats] + args.extra.split()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("%s: sieve failed (%d): %s" % (tag, p.returncode, p.stderr[-2000:]))
    m = SUMMARY.search(p.stderr)
    if not m:
        sys.exit("%s: no summary line in: %s" % (tag, p.stderr[-2000:]))
    outs = [json.loads(l) for l in p.stdout.splitlines()]
    errors = [o for o in outs if "error" in o]
    if len(outs) != len(lines) or errors:
        sys.exit("%s: %d lines for %d requests, %d errors: %s" % (tag, len(outs), len(lines), len(errors),
                                                                  errors))
    return {"prompt_tokens": int(m.group(1)), "completion_tokens": int(m.group(2)),
            "seconds": float(m.group(3)), "tokens_per_s": float(m.group(4)), "steps": int(m.group(5)),
            "max_running": int(m.group(6)), "stats": json.load(open(stats))}, outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sieve", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--schemas", required=True)
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--max-num-seqs", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--extra", default="", help="more arguments for sieve generate --batch")
    ap.add_argument("--out")
    args = ap.parse_args()
    # big_integers.json's 20-digit literals do not fit a batch line's JSON
    # parser (jansson's integers are 64-bit): the line is refused as a syntax
    # error, so the schema is left out here.
    names = sorted(n for n in os.listdir(args.schemas) if n.endswith(".json") and n != "big_integers.json")
    schemas = [json.load(open(os.path.join(args.schemas, n))) for n in names]
    base = [{"prompt": "Record %d: write it as JSON." % i, "max_tokens": args.max_tokens, "temperature": 1.0,
             "seed": i} for i in range(args.requests)]
    with tempfile.TemporaryDirectory() as tmp:
        free, _ = run(args, base, "unconstrained", tmp)
        cons_lines = [dict(l, schema=schemas[i % len(schemas)]) for i, l in enumerate(base)]
        cons, outs = run(args, cons_lines, "constrained", tmp)
    bad = 0
    for o in outs:
        for c in o["outputs"]:
            try:
                json.loads(c["text"])
            except ValueError:
                bad += 1
                print("invalid JSON in line %d: %r" % (o.get("index", -1), c["text"][:200]))
    res = {"model": args.model, "device": args.device, "requests": args.requests,
           "max_num_seqs": args.max_num_seqs, "max_tokens": args.max_tokens, "schemas": len(schemas),
           "extra": args.extra, "unconstrained": free, "constrained": cons,
           "ratio": cons["tokens_per_s"] / free["tokens_per_s"] if free["tokens_per_s"] else 0.0,
           "invalid": bad}
    for r in (free, cons):
        r["ms_per_step"] = 1000.0 * r["seconds"] / r["steps"] if r["steps"] else 0.0
    res["step_ratio"] = free["ms_per_step"] / cons["ms_per_step"] if cons["ms_per_step"] else 0.0
    for name, r in (("unconstrained", free), ("constrained", cons)):
        st = r["stats"]
        print("%-14s %d tokens in %.2f s, %.1f tokens/s; %d steps, %.2f ms a step; %d sampled (%d on the "
              "device), %d forced; %d rows; step graphs: %d opened, %d replayed, %d captured" %
              (name + ":", r["completion_tokens"], r["seconds"], r["tokens_per_s"], r["steps"],
               r["ms_per_step"], st["sampled"], st.get("dev_sampled", 0), st["forced"], st["rows"],
               st.get("graph_steps", 0), st.get("graph_replays", 0), st.get("graph_captures", 0)))
        if "step_ns" in st and r["steps"]:
            per = lambda k: st[k] / 1e6 / r["steps"]
            print("%-14s ms a step: %.2f in all, %.2f in the forward (%.2f of it in the device sampler's "
                  "hook), %.2f outside it; masks %.2f, host sampling %.2f" %
                  ("", per("step_ns"), per("forward_ns"), per("hook_ns"), per("step_ns") - per("forward_ns"),
                   per("mask_ns"), per("sample_ns")))
    print("constrained / unconstrained: tokens/s %.3f, steps/s %.3f; invalid outputs: %d" %
          (res["ratio"], res["step_ratio"], bad))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
