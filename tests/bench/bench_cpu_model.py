#!/usr/bin/env python3
"""bench_cpu_model.py — prompt and generation tokens/s of `sieve generate` on
the CPU, next to llama.cpp (through llama-cpp-python) on the same GGUF file.

Run it with the llama.cpp venv's Python (tests/bench/peers/setup_llamacpp.sh);
it uses the standard library and llama_cpp only:

    nice -n 10 .venv-llamacpp/bin/python tests/bench/bench_cpu_model.py \
        [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] [--sieve build-rel/sieve] \
        [--threads 2] [--reps 5] [--jsonl out.jsonl]

Method (the same for both engines):
  * Prompts are deterministic token ids: a fixed English paragraph, repeated,
    tokenized by llama.cpp (`Llama.tokenize`, no BOS, no special tokens; the
    GGUF's own vocabulary, the one sieve reads) and cut to the workload's
    length. Both engines get exactly these ids, with no BOS added.
  * Workloads: 128 prompt tokens + 64 generated, and 512 prompt + 16
    generated (prompt-bound). Greedy decoding (temperature 0); generation
    stops early only at an end-of-generation token.
  * Every measurement is a fresh process that loads the model first; the
    timings exclude the load. Engines alternate, and which one goes first
    rotates from one repetition to the next; one untimed warm-up run of each
    engine and workload comes first; the table reports the median over the repetitions.
  * prompt time: one forward pass over all prompt tokens up to the logits of
    the last one. generation time: from there until the N-th token is
    sampled: N samples and N-1 single-token forward passes (the last token is
    not fed back). tokens/s = tokens / time.
  * sieve: `sieve generate -m MODEL --prompt-ids ... --max-tokens N
    --temperature 0 --threads T --ctx 2048 --print-ids`; both times are parsed
    from its stderr line (`prompt P tokens in X ms; N generated (0 forced) in
    Y ms`), which sieve prints with 1 ms resolution.
  * llama.cpp: `llama_cpp.Llama(model, n_threads=T, n_threads_batch=T,
    n_ctx=2048, verbose=False)` (llama-cpp-python's other defaults: n_batch =
    n_ubatch = 512, F16 KV cache, flash attention off, mmap), then the
    low-level API: `llama_decode(llama_batch_get_one(prompt))`, a greedy
    sampler chain (`llama_sampler_sample` on the last logits), and
    `llama_decode` of each sampled token; wall clock (time.perf_counter_ns)
    around those calls, the prompt time ending after `llama_synchronize`.
    llama.cpp's own counters (`llama_perf_context`: t_p_eval_ms, t_eval_ms)
    are kept in the raw records as a cross-check.
  * llama.cpp is measured twice: as built (its CPU backend's threads meet at
    OpenMP barriers, which spin before they sleep: libgomp's default wait
    policy), and with OMP_WAIT_POLICY=passive in the worker's environment
    (waiting threads sleep at once). On a machine whose cores are busy with
    other work the spinning thread takes the core its partner needs, which
    makes the default much slower than one thread; the passive row shows
    what the barriers cost there. sieve's thread pool waits on condition
    variables. With --threads 1 there are no barriers and both rows agree.
  * Greedy agreement: the generated ids of the 128+64 workload are compared
    between the engines; the first index where they differ is reported (a
    difference is expected at some point: llama.cpp quantizes the
    activations to Q8 for its Q4_1/Q8_0 dot products, sieve computes in fp32
    on dequantized weights). It is information, not a failure.

Output: one JSON line per measurement on stdout as it is made (and in
--jsonl), then a markdown table of the medians and the agreement line.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PARAGRAPH = (
    "The river runs slowly past the old mill, where the stones are still warm from the "
    "afternoon sun. Children walk home along the bank, counting the boats that drift toward "
    "the harbour, and the baker closes his shop as the church bell rings six times. In the "
    "evening the town is quiet: a few lights in the windows, a dog barking somewhere behind "
    "the market, and the smell of bread and rain in the narrow streets. "
)

WORKLOADS = [(128, 64), (512, 16)]

SIEVE_LINE = re.compile(
    r"prompt (\d+) tokens in (\d+) ms; (\d+) generated \((\d+) forced\) in (\d+) ms")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- llama.cpp

def llama_worker(spec):
    """One llama.cpp measurement in this (fresh) process; returns a dict."""
    import llama_cpp

    t_load0 = time.perf_counter_ns()
    llm = llama_cpp.Llama(model_path=spec["model"], n_threads=spec["threads"],
                          n_threads_batch=spec["threads"], n_ctx=spec["n_ctx"], verbose=False)
    t_load1 = time.perf_counter_ns()
    ctx = llm.ctx
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    sparams = llama_cpp.llama_sampler_chain_default_params()
    smpl = llama_cpp.llama_sampler_chain_init(sparams)
    llama_cpp.llama_sampler_chain_add(smpl, llama_cpp.llama_sampler_init_greedy())
    llama_cpp.llama_perf_context_reset(ctx)

    prompt = spec["prompt"]
    n_gen = spec["n_gen"]
    arr = (llama_cpp.llama_token * len(prompt))(*prompt)
    one = (llama_cpp.llama_token * 1)()
    out = []

    t0 = time.perf_counter_ns()
    rc = llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(arr, len(prompt)))
    llama_cpp.llama_synchronize(ctx)
    t1 = time.perf_counter_ns()
    if rc != 0:
        raise RuntimeError(f"llama_decode(prompt) returned {rc}")
    finish = "length"
    while True:
        tok = llama_cpp.llama_sampler_sample(smpl, ctx, -1)
        if llama_cpp.llama_vocab_is_eog(vocab, tok):
            finish = "stop"
            break
        out.append(tok)
        if len(out) >= n_gen:
            break
        one[0] = tok
        rc = llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(one, 1))
        if rc != 0:
            raise RuntimeError(f"llama_decode(token) returned {rc}")
    t2 = time.perf_counter_ns()
    perf = llama_cpp.llama_perf_context(ctx)
    llama_cpp.llama_sampler_free(smpl)
    res = {
        "prompt_tokens": len(prompt), "prompt_ms": (t1 - t0) / 1e6,
        "gen_tokens": len(out), "gen_ms": (t2 - t1) / 1e6, "finish": finish,
        "load_ms": (t_load1 - t_load0) / 1e6, "ids": out,
        "perf": {"t_p_eval_ms": perf.t_p_eval_ms, "n_p_eval": perf.n_p_eval,
                 "t_eval_ms": perf.t_eval_ms, "n_eval": perf.n_eval},
    }
    llm.close()
    return res


def run_llama(args, prompt, n_gen, omp_wait_policy=None):
    spec = {"model": args.model, "threads": args.threads, "n_ctx": 2048,
            "prompt": prompt, "n_gen": n_gen}
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if omp_wait_policy:
        env["OMP_WAIT_POLICY"] = omp_wait_policy
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--llama-worker"],
                       input=json.dumps(spec), capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"llama.cpp worker failed ({p.returncode}):\n{p.stderr}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["process_wall_ms"] = wall * 1e3
    return res


# ---------------------------------------------------------------- sieve

def run_sieve(args, prompt, n_gen, kernels="ref"):
    cmd = [args.sieve, "generate", "-m", args.model, "--prompt-ids", ",".join(map(str, prompt)),
           "--max-tokens", str(n_gen), "--temperature", "0", "--threads", str(args.threads),
           "--ctx", "2048", "--print-ids", "--cpu-kernels", kernels]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"sieve failed ({p.returncode}): {p.stderr}")
    m = SIEVE_LINE.search(p.stderr)
    if not m:
        raise SystemExit(f"no timing line in sieve's stderr: {p.stderr!r}")
    ids_line = p.stdout.strip()
    ids = [int(x) for x in ids_line.split(",")] if ids_line else []
    fin = re.search(r"finish (\w+)", p.stderr)
    return {"prompt_tokens": int(m.group(1)), "prompt_ms": float(m.group(2)),
            "gen_tokens": int(m.group(3)), "gen_ms": float(m.group(5)),
            "finish": fin.group(1) if fin else None, "ids": ids,
            "process_wall_ms": wall * 1e3}


# ---------------------------------------------------------------- driver

def prompt_ids(model, n_max):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    ids = llm.tokenize((PARAGRAPH * 12).encode(), add_bos=False, special=False)
    llm.close()
    if len(ids) < n_max:
        raise SystemExit(f"the prompt text gives only {len(ids)} tokens")
    return ids[:n_max]


def first_divergence(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def versions(args):
    from importlib.metadata import version
    import llama_cpp
    commit = args.sieve_commit
    if not commit:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        commit += " (work tree with uncommitted changes)" if dirty else ""
    sv = subprocess.run([args.sieve, "--version"], capture_output=True, text=True).stdout.strip()
    return {"llama_cpp_python": version("llama-cpp-python"),
            "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode().strip(),
            "python": platform.python_version(), "sieve": args.sieve, "sieve_version": sv,
            "sieve_commit": commit, "machine": platform.machine(), "loadavg": os.getloadavg()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--sieve", default=os.path.join(ROOT, "build-rel/sieve"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per engine and workload")
    ap.add_argument("--jsonl", help="also write the raw records here")
    ap.add_argument("--sieve-commit", help="what to record as the sieve binary's commit "
                    "(default: this checkout's HEAD, marked when the work tree has changes)")
    ap.add_argument("--no-passive", action="store_true",
                    help="skip the llama.cpp row with OMP_WAIT_POLICY=passive")
    ap.add_argument("--llama-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.llama_worker:
        print(json.dumps(llama_worker(json.loads(sys.stdin.read()))), flush=True)
        return

    for path in (args.model, args.sieve):
        if not os.path.exists(path):
            raise SystemExit(f"{path} not found (scripts/fetch-model.sh; cmake --build build-rel --target sieve)")
    ids = prompt_ids(args.model, max(p for p, _ in WORKLOADS))
    info = versions(args)
    info.update({"record": "info", "model": os.path.relpath(args.model, ROOT), "threads": args.threads,
                 "reps": args.reps, "workloads": WORKLOADS,
                 "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    jf = open(args.jsonl, "w") if args.jsonl else None

    def emit(rec):
        line = json.dumps(rec)
        print(line, flush=True)
        if jf:
            jf.write(line + "\n")
            jf.flush()

    emit(info)
    engines = {"sieve": run_sieve, "llama.cpp": run_llama,
               "sieve, --cpu-kernels int8": lambda a, p, n: run_sieve(a, p, n, kernels="int8")}
    if not args.no_passive:
        engines["llama.cpp, OMP_WAIT_POLICY=passive"] = \
            lambda a, p, n: run_llama(a, p, n, omp_wait_policy="passive")
    results = {}  # (workload, engine) -> list of records
    names = list(engines)
    for rep in range(-1, args.reps):  # rep -1: untimed warm-up
        k = (rep + 1) % len(names)  # the first engine rotates
        order = names[k:] + names[:k]
        for n_prompt, n_gen in WORKLOADS:
            for eng in order:
                log(f"rep {rep} {eng} {n_prompt}+{n_gen} (load {os.getloadavg()[0]:.2f})")
                r = engines[eng](args, ids[:n_prompt], n_gen)
                r.update({"record": "run", "engine": eng, "threads": args.threads, "rep": rep,
                          "warmup": rep < 0, "workload": f"{n_prompt}+{n_gen}",
                          "prompt_tok_s": r["prompt_tokens"] / (r["prompt_ms"] / 1e3),
                          "gen_tok_s": r["gen_tokens"] / (r["gen_ms"] / 1e3) if r["gen_tokens"] else 0.0,
                          "loadavg_1m": os.getloadavg()[0]})
                emit(r)
                if rep >= 0:
                    results.setdefault((f"{n_prompt}+{n_gen}", eng), []).append(r)

    # Greedy agreement on 128+64.
    wl = f"{WORKLOADS[0][0]}+{WORKLOADS[0][1]}"
    s_ids = [tuple(r["ids"]) for r in results[(wl, "sieve")]]
    l_ids = [tuple(r["ids"]) for r in results[(wl, "llama.cpp")]]
    div = first_divergence(list(s_ids[0]), list(l_ids[0]))
    agree = {"record": "agreement", "workload": wl,
             "sieve_deterministic": len(set(s_ids)) == 1,
             "llama_deterministic": len(set(l_ids)) == 1,
             "first_divergence": div, "n_sieve": len(s_ids[0]), "n_llama": len(l_ids[0]),
             "sieve_ids": list(s_ids[0]), "llama_ids": list(l_ids[0])}
    i8_ids = [tuple(r["ids"]) for r in results[(wl, "sieve, --cpu-kernels int8")]]
    agree["int8_deterministic"] = len(set(i8_ids)) == 1
    agree["int8_first_divergence_from_llama"] = first_divergence(list(i8_ids[0]), list(l_ids[0]))
    agree["int8_first_divergence_from_sieve_ref"] = first_divergence(list(i8_ids[0]), list(s_ids[0]))
    for name in names[3:]:
        agree[f"same ids as llama.cpp: {name}"] = all(
            tuple(r["ids"]) == l_ids[0] for r in results[(wl, name)])
    emit(agree)
    end_load = os.getloadavg()
    emit({"record": "end", "loadavg": end_load})

    med = statistics.median
    print()
    print(f"Threads {args.threads}; median of {args.reps} runs each; "
          f"load average at the start {info['loadavg'][0]:.2f}, at the end {end_load[0]:.2f}.")
    print()
    print("| workload | engine | threads | prompt tok/s | generation tok/s | prompt ms | generation ms | prompt tok/s range | generation tok/s range |")
    print("|:--|:--|--:|--:|--:|--:|--:|--:|--:|")
    for n_prompt, n_gen in WORKLOADS:
        w = f"{n_prompt}+{n_gen}"
        for eng in engines:
            rs = results[(w, eng)]
            pt = [r["prompt_tok_s"] for r in rs]
            gt = [r["gen_tok_s"] for r in rs]
            print(f"| {n_prompt} prompt + {n_gen} generated | {eng} | {args.threads} | {med(pt):.1f} | {med(gt):.1f} "
                  f"| {med(r['prompt_ms'] for r in rs):.1f} | {med(r['gen_ms'] for r in rs):.1f} "
                  f"| {min(pt):.1f}–{max(pt):.1f} | {min(gt):.1f}–{max(gt):.1f} |")
    print()
    if div is None:
        print(f"Greedy ids ({wl}): identical ({len(s_ids[0])} tokens).")
    else:
        print(f"Greedy ids ({wl}): first divergence at generated index {div} "
              f"(sieve {s_ids[0][div] if div < len(s_ids[0]) else 'end'}, "
              f"llama.cpp {l_ids[0][div] if div < len(l_ids[0]) else 'end'}); "
              f"each engine repeatable across runs: sieve {agree['sieve_deterministic']}, "
              f"llama.cpp {agree['llama_deterministic']}.")
    print(f"--cpu-kernels int8: repeatable {agree['int8_deterministic']}; first divergence from llama.cpp "
          f"{agree['int8_first_divergence_from_llama']}, from sieve's ref kernels "
          f"{agree['int8_first_divergence_from_sieve_ref']} (None: identical).")
    if jf:
        jf.close()


if __name__ == "__main__":
    main()
