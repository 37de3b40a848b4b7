#!/usr/bin/env python3
"""bench_engine.py: CPU throughput of the engine through `sieve generate --batch`.

Two parts, each a set of `sieve generate --batch` runs of the default model
(SmolLM2-135M-Instruct, Q4_1) with the engine's counters from --stats:

1. Throughput at 1, 8 and 32 concurrent requests (--max-num-seqs equal to the
   concurrency, 2 x concurrency requests, at least 4), unconstrained and
   constrained (a JSON schema) side by side: the same chat prompts, greedy,
   max_tokens 64, each prompt different (only the chat template's head is
   shared through the prefix cache). Reported: prompt and completion tokens,
   engine seconds (the summary's, from the first submit to the last output:
   model load and constraint compilation excluded), total tokens/s
   ((prompt + completion) / s) and generated tokens/s (completion / s), and
   the forward steps, and the CPU seconds of the whole sieve process (all its
   threads, model load and compilation included: on a shared machine the
   tokens per CPU second vary less with the load than tokens per second).

2. Jump-forward saving on key-heavy schemas: the MaskBench files of
   tests/extended/maskbench_engine.txt whose shortest valid instance has at
   least 5 object keys (tests/extended/test_engine_maskbench.py's key_heavy),
   greedy, max_tokens = shortest instance + 32, with jump-forward on and off
   (--no-jump-forward), at concurrency 1 and 16: forward steps, tokens
   sampled and forced, engine seconds, and how many greedy texts differ.

Each configuration runs --repeat times (default 1); the fastest run is
reported. Needs a Release build (`cmake -DCMAKE_BUILD_TYPE=Release`), the
model (scripts/fetch-model.sh) and, for part 2, ../shared/data. Prints a
Markdown table and the load average before and after; --json FILE writes the
raw records.

Usage:
  .venv/bin/python tests/bench/bench_engine.py --sieve build-rel/sieve [--threads 2]
      [--conc 1,8,32] [--repeat 1] [--skip-jf] [--json FILE]
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_TOKENS = 64

TOPICS = ["keeps bees", "repairs old clocks", "sails alone around the world", "teaches chemistry", "grows rare orchids",
          "builds violins", "trains sled dogs", "maps caves", "runs a night bakery", "restores paintings",
          "studies volcanoes", "writes crossword puzzles", "drives a snow plough", "collects meteorites",
          "designs board games", "flies cargo planes"]

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "maxLength": 40},
        "occupation": {"type": "string", "maxLength": 40},
        "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 3},
    },
    "required": ["name", "age", "city", "occupation", "hobbies"],
    "additionalProperties": False,
}

SUMMARY = re.compile(r"(\d+) prompt \+ (\d+) completion tokens in ([0-9.]+) s")


def prompts(n):
    """n distinct prompts: topic i, and a variant number past 16."""
    out = []
    for i in range(n):
        t = TOPICS[i % len(TOPICS)]
        v = f" (person number {i // len(TOPICS) + 1})" if i >= len(TOPICS) else ""
        out.append(f"Describe a fictional person who {t}{v}: their name, age, city, occupation and hobbies. "
                   "Answer in JSON.")
    return out


def run(sieve, lines, seqs, threads, extra=()):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "in.jsonl"
        stats = Path(d) / "stats.json"
        f.write_text("".join(json.dumps(l) + "\n" for l in lines))
        t0 = time.monotonic()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run([sieve, "generate", "-m", str(MODEL), "--batch", str(f), "--max-num-seqs", str(seqs),
                            "--threads", str(threads), "--stats", str(stats), *extra], capture_output=True)
        wall = time.monotonic() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        err = r.stderr.decode(errors="replace")
        if r.returncode != 0:
            sys.exit(f"bench_engine: sieve failed ({r.returncode}): {err}")
        outs = [json.loads(x) for x in r.stdout.decode().splitlines() if x.strip()]
        bad = [o for o in outs if "error" in o]
        if bad:
            sys.exit(f"bench_engine: error lines: {bad[:3]}")
        m = SUMMARY.search(err)
        if not m:
            sys.exit(f"bench_engine: no summary in: {err}")
        st = json.loads(stats.read_text())
    return {"prompt": int(m.group(1)), "completion": int(m.group(2)), "secs": float(m.group(3)), "wall": wall,
            "cpu": cpu, "stats": st, "texts": [o["outputs"][0]["text"] for o in outs]}


def best(sieve, lines, seqs, threads, repeat, extra=()):
    runs = [run(sieve, lines, seqs, threads, extra) for _ in range(repeat)]
    return min(runs, key=lambda r: r["secs"])


def load():
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def throughput(a):
    rows = []
    for c in a.conc:
        n = max(4, 2 * c)
        ps = prompts(n)
        for kind in ("unconstrained", "constrained"):
            lines = [{"prompt": p, "chat": True, "max_tokens": MAX_TOKENS, "temperature": 0.0} for p in ps]
            if kind == "constrained":
                for l in lines:
                    l["schema"] = PERSON
            r = best(a.sieve, lines, c, a.threads, a.repeat)
            r.update(conc=c, requests=n, kind=kind)
            rows.append(r)
            print(f"  conc {c:2} {kind:13} {r['prompt']:5} + {r['completion']:5} tokens in {r['secs']:7.2f} s: "
                  f"{(r['prompt'] + r['completion']) / r['secs']:7.1f} total tok/s, "
                  f"{r['completion'] / r['secs']:6.1f} gen tok/s, {r['stats']['steps']} steps (load {load()})",
                  file=sys.stderr, flush=True)
    return rows


def jump_forward(a):
    sys.path.insert(0, str(ROOT / "tests" / "extended"))
    os.environ.setdefault("SIEVE_SHARED_DATA", str(a.data))
    os.environ.setdefault("TOK_CLI_BIN", a.tok_cli)
    import test_engine_maskbench as tm  # noqa: E402 - the test's list, prompts and shortest-instance counts
    cases = tm.load_cases()
    heavy = tm.key_heavy(cases)
    lines = [{"prompt": tm.prompt(s), "chat": True, "schema": s, "max_tokens": n + tm.T1_EXTRA, "temperature": 0.0}
             for (_, s, n) in heavy]
    rows = []
    for c in a.jf_conc:
        pair = {}
        for mode, extra in (("on", ()), ("off", ("--no-jump-forward",))):
            r = best(a.sieve, lines, c, a.threads, a.repeat, extra)
            r.update(conc=c, requests=len(lines), mode=mode)
            pair[mode] = r
            rows.append(r)
            print(f"  jump-forward {mode:3} conc {c:2}: {r['stats']['steps']} steps, {r['stats']['sampled']} sampled, "
                  f"{r['stats']['forced']} forced, {r['secs']:.2f} s (load {load()})", file=sys.stderr, flush=True)
        pair["on"]["differ"] = sum(x != y for x, y in zip(pair["on"]["texts"], pair["off"]["texts"]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sieve", default=str(ROOT / "build-rel" / "sieve"))
    ap.add_argument("--tok-cli", default=str(ROOT / "build" / "tests" / "tok_cli"))
    ap.add_argument("--data", default=str(ROOT / ".." / "shared" / "data"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--conc", default="1,8,32")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--skip-jf", action="store_true", help="only the throughput part")
    ap.add_argument("--jf-conc", default="1,16", help="concurrencies of the jump-forward part (default 1,16)")
    ap.add_argument("--json", help="write the raw records here")
    a = ap.parse_args()
    a.conc = [int(x) for x in a.conc.split(",") if x]
    a.jf_conc = [int(x) for x in a.jf_conc.split(",") if x]
    if not MODEL.is_file():
        sys.exit(f"bench_engine: {MODEL} is missing (scripts/fetch-model.sh)")
    h = subprocess.run([a.sieve, "generate", "--batch", "-", "--help"], capture_output=True).stdout.decode()
    if "--stats" not in h or "--no-jump-forward" not in h:
        sys.exit(f"bench_engine: {a.sieve} has no --stats / --no-jump-forward")

    load0 = load()
    print(f"bench_engine: {a.sieve}, {a.threads} threads, load {load0}", file=sys.stderr, flush=True)
    tp = throughput(a)
    jf = [] if a.skip_jf else jump_forward(a)
    load1 = load()

    print(f"\nLoad average before {load0}, after {load1}; {a.threads} threads; greedy; max_tokens {MAX_TOKENS}.\n")
    if tp:
        print("| concurrency | requests | kind | prompt tok | gen tok | steps | s | total tok/s | gen tok/s | "
              "CPU s | total tok/CPU s |")
        print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in tp:
        tot = r["prompt"] + r["completion"]
        print(f"| {r['conc']} | {r['requests']} | {r['kind']} | {r['prompt']} | {r['completion']} | "
              f"{r['stats']['steps']} | {r['secs']:.2f} | {tot / r['secs']:.1f} | "
              f"{r['completion'] / r['secs']:.1f} | {r['cpu']:.1f} | {tot / r['cpu']:.1f} |")
    if jf:
        print(f"\nJump-forward, {jf[0]['requests']} key-heavy MaskBench schemas, greedy:\n")
        print("| concurrency | jump-forward | gen tok | steps | sampled | forced | rollbacks | s | CPU s "
              "| texts differ |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in jf:
            s = r["stats"]
            print(f"| {r['conc']} | {r['mode']} | {r['completion']} | {s['steps']} | {s['sampled']} | {s['forced']} | "
                  f"{s['rollbacks']} | {r['secs']:.2f} | {r['cpu']:.1f} | {r.get('differ', '')} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"load_before": load0, "load_after": load1, "throughput": tp, "jump_forward": jf}, f, indent=1)


if __name__ == "__main__":
    main()
