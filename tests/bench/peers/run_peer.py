#!/usr/bin/env python3
"""run_peer.py: the MaskBench method on a peer grammar engine (llguidance or XGrammar).

    .venv-peers/bin/python tests/bench/peers/run_peer.py --engine llguidance \
        --tokenizer ../shared/data/tokenizers/llama3/tokenizer.json \
        [--per-schema] [--timeout-s 60] PATH...

PATH: MaskBench JSON files ({description, meta, schema, tests: [{description,
valid, data, text?}]}), or folders of them (their *.json, sorted). A test's
instance text is its "text" (written by tests/bench/maskbench_prep.py) or else
json.dumps(data, indent=None, ensure_ascii=False), exactly as MaskBench does.

Prints one JSON object on standard output, the same shape as
`sieve maskbench`:
    {"engine", "version", "schemas", "passing", "compile_error",
     "validation_error", "invalidation_error", "timeout", "crash",
     "ttfm_us": {"p50","p90","p99","max"}, "tbm_us": {"p50","p90","p99","max"},
     "tbm", "tbm_samples", "mask_only_us", "wall_s", "config"}
With --per-schema, one line per schema comes first:
    {"file", "outcome", "ttfm_us", "masks", "error"?}

The method (the same for every engine; see README.md beside this file):
  * The engine runs in a worker process, one schema at a time, one thread.
    The parent gives each schema --timeout-s seconds of wall time (from the
    moment the worker gets the file to its answer); past that the worker is
    killed, the schema counts as a timeout, and a fresh worker carries on.
    A worker that dies (signal, abort, or more than --max-rss-gib resident)
    makes the schema a crash.
  * Timers (time.perf_counter_ns) surround the engine's calls only.
    TTFM = compile + creating the matcher + the first mask.
  * Each instance's text is tokenized with the Hugging Face `tokenizers`
    library (add_special_tokens=False), untimed. Before each token the
    current mask must allow it (bit set), else the instance is rejected there.
    One TBM sample = consuming a token + computing the next mask (the time
    from one mask to the next, as MaskBench times compute_mask+commit_token;
    --tbm mask counts the mask computation only; the summary gives both).
    Instances after the first start from a fresh matcher (created untimed),
    and their first mask alone is also a TBM sample. After the last token
    the mask (a TBM sample too) must allow EOS (<|end_of_text|>, or the
    tokenizer config's eos_token) for the instance to be accepted.
  * Outcome per schema: compile_error (no first mask), invalidation_error (an
    invalid instance accepted), validation_error (a valid instance rejected),
    else passing (schemas without tests pass once they compile); timeout and
    crash as above.
  * Percentiles: nearest rank over the pooled samples of all schemas. A
    schema that timed out or crashed before its first mask adds --timeout-s
    (timeout) or nothing (crash) to TTFM; its TBM samples are lost.
"""
import argparse
import json
import math
import os
import select
import signal
import subprocess
import sys
import time

EOS_NAMES = ("<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>")


# --------------------------------------------------------------------------
# worker side: loads one engine, answers one schema per request
# --------------------------------------------------------------------------

def find_eos(tokenizer_path, hf_tok):
    cfg = os.path.join(os.path.dirname(tokenizer_path), "tokenizer_config.json")
    name = None
    if os.path.exists(cfg):
        with open(cfg, encoding="utf-8") as f:
            eos = json.load(f).get("eos_token")
        if isinstance(eos, dict):
            eos = eos.get("content")
        name = eos
    vocab = hf_tok.get_vocab(with_added_tokens=True)
    for n in ([name] if name else []) + list(EOS_NAMES):
        if n in vocab:
            return vocab[n], n
    raise SystemExit("run_peer: cannot tell the EOS token of " + tokenizer_path)


class LlgEngine:
    name = "llguidance"

    def __init__(self, tokenizer_path, eos, opts):
        import llguidance
        import llguidance.hf
        import numpy as np
        from transformers import PreTrainedTokenizerFast
        from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

        self.llg = llguidance
        self.fill = fill_next_token_bitmask
        hf = PreTrainedTokenizerFast(tokenizer_file=tokenizer_path)
        self.tok = llguidance.hf.from_tokenizer(hf, eos_token=eos)
        self.vocab_size = self.tok.vocab_size
        self.mask = allocate_token_bitmask(1, self.vocab_size)
        self.words = self.mask[0].view(np.uint32)
        self.m = None
        self.pristine = None

    def compile_and_first_mask(self, schema):
        grammar = json.dumps({"grammars": [{"json_schema": schema}]})
        t0 = time.perf_counter_ns()
        m = self.llg.LLMatcher(self.tok, grammar)
        t1 = time.perf_counter_ns()
        if m.is_error():
            return None, m.get_error()
        # an untouched copy for the later instances, taken untimed
        self.pristine = m.deep_copy()
        t2 = time.perf_counter_ns()
        self.fill(m, self.mask, 0)
        t3 = time.perf_counter_ns()
        if m.is_error():
            return None, m.get_error()
        self.m = m
        return (t1 - t0) + (t3 - t2), None

    def fresh(self):
        # a pristine matcher per instance, created untimed
        self.m = self.pristine.deep_copy()

    def first_mask(self):
        t0 = time.perf_counter_ns()
        self.fill(self.m, self.mask, 0)
        t1 = time.perf_counter_ns()
        return t1 - t0, self.m.get_error() if self.m.is_error() else None

    def step(self, tok):
        """Consume tok, then compute the next mask: (consume_ns, mask_ns, error)."""
        t0 = time.perf_counter_ns()
        ok = self.m.consume_token(tok)
        t1 = time.perf_counter_ns()
        if not ok or self.m.is_error():
            return t1 - t0, None, self.m.get_error() or "consume_token failed"
        t2 = time.perf_counter_ns()
        self.fill(self.m, self.mask, 0)
        t3 = time.perf_counter_ns()
        return t1 - t0, t3 - t2, self.m.get_error() if self.m.is_error() else None

    def allowed(self, tok):
        return (int(self.words[tok >> 5]) >> (tok & 31)) & 1 == 1


class XgrEngine:
    name = "xgrammar"

    def __init__(self, tokenizer_path, eos, opts):
        import numpy as np
        import xgrammar as xgr
        from transformers import PreTrainedTokenizerFast

        try:
            import torch
            torch.set_num_threads(1)
        except Exception:
            pass
        self.xgr = xgr
        hf = PreTrainedTokenizerFast(tokenizer_file=tokenizer_path)
        self.vocab_size = len(hf)
        info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=self.vocab_size, stop_token_ids=[eos])
        # one thread, and no compiled-grammar cache: every schema compiles cold
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.compliant = opts.xgr_compliant
        self.mask = xgr.allocate_token_bitmask(1, info.vocab_size)
        self.words = self.mask.numpy()[0].view(np.uint32)
        self.compiled = None
        self.m = None

    def compile_and_first_mask(self, schema):
        s = json.dumps(schema)
        if self.compliant:
            kw = dict(any_whitespace=True, strict_mode=False)
        else:  # MaskBench's "XGrammar" (default) configuration
            kw = dict(any_whitespace=False, strict_mode=True)
        t0 = time.perf_counter_ns()
        try:
            g = self.compiler.compile_json_schema(s, **kw)
            m = self.xgr.GrammarMatcher(g)
            m.fill_next_token_bitmask(self.mask)
        except Exception as e:  # compile errors are exceptions
            return None, f"{type(e).__name__}: {e}"
        t1 = time.perf_counter_ns()
        self.compiled = g
        self.m = m
        return t1 - t0, None

    def fresh(self):
        self.m = self.xgr.GrammarMatcher(self.compiled)

    def first_mask(self):
        t0 = time.perf_counter_ns()
        self.m.fill_next_token_bitmask(self.mask)
        t1 = time.perf_counter_ns()
        return t1 - t0, None

    def step(self, tok):
        """Consume tok, then compute the next mask: (consume_ns, mask_ns, error)."""
        t0 = time.perf_counter_ns()
        ok = self.m.accept_token(tok)
        t1 = time.perf_counter_ns()
        if not ok:
            return t1 - t0, None, "accept_token returned false"
        t2 = time.perf_counter_ns()
        self.m.fill_next_token_bitmask(self.mask)
        t3 = time.perf_counter_ns()
        return t1 - t0, t3 - t2, None

    def allowed(self, tok):
        return (int(self.words[tok >> 5]) >> (tok & 31)) & 1 == 1


ENGINES = {"llguidance": LlgEngine, "xgrammar": XgrEngine}


def instance_text(test):
    t = test.get("text")
    if t is None:
        t = json.dumps(test["data"], indent=None, ensure_ascii=False)
    return t


def run_schema(engine, hf_tok, eos, path):
    """Returns (ttfm_ns | None, masks, outcome, error): masks = [[consume_ns, mask_ns], ...],
    one per mask after the first (consume_ns 0 for an instance's first mask)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    ttfm, err = engine.compile_and_first_mask(doc["schema"])
    if ttfm is None:
        return None, [], "compile_error", str(err)[:500]
    emit({"event": "compiled", "ttfm_ns": ttfm})
    tbm = []
    first_valid_err = None
    first_invalid_err = None
    tests = doc.get("tests", [])
    for i, test in enumerate(tests):
        ids = hf_tok.encode(instance_text(test), add_special_tokens=False).ids
        why = None
        if i > 0:
            engine.fresh()
            dt, e = engine.first_mask()
            tbm.append([0, dt])
            if e:
                why = f"first mask: {e}"
        accepted = why is None
        if accepted:
            for k, t in enumerate(ids):
                if not engine.allowed(t):
                    accepted = False
                    why = f"token #{k} ({t}) not allowed"
                    break
                dc, dm, e = engine.step(t)
                if dm is not None:
                    tbm.append([dc, dm])
                if e:
                    accepted = False
                    why = f"token #{k} ({t}): {e}"
                    break
            if accepted and not engine.allowed(eos):
                accepted = False
                why = "EOS not allowed at the end"
        if test["valid"] and not accepted and first_valid_err is None:
            first_valid_err = f"test #{i}: valid instance rejected: {why}"
        if not test["valid"] and accepted and first_invalid_err is None:
            first_invalid_err = f"test #{i}: invalid instance accepted"
    if first_invalid_err:
        return ttfm, tbm, "invalidation_error", first_invalid_err
    if first_valid_err:
        return ttfm, tbm, "validation_error", first_valid_err
    return ttfm, tbm, "passing", None


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def worker_main(args):
    import tokenizers

    hf_tok = tokenizers.Tokenizer.from_file(args.tokenizer)
    eos, _ = find_eos(args.tokenizer, hf_tok)
    engine = ENGINES[args.engine](args.tokenizer, eos, args)
    emit({"event": "ready", "eos": eos, "vocab_size": engine.vocab_size})
    for line in sys.stdin:
        path = line.rstrip("\n")
        if not path:
            continue
        try:
            ttfm, tbm, outcome, err = run_schema(engine, hf_tok, eos, path)
        except Exception as e:  # a Python-level failure of the engine or the file
            emit({"event": "done", "outcome": "crash", "error": f"{type(e).__name__}: {e}"[:500], "masks_ns": []})
            continue
        out = {"event": "done", "outcome": outcome, "masks_ns": tbm}
        if ttfm is not None:
            out["ttfm_ns"] = ttfm
        if err:
            out["error"] = err
        emit(out)


# --------------------------------------------------------------------------
# parent side: feeds files to a worker, enforces the timeout, aggregates
# --------------------------------------------------------------------------

class Worker:
    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env, start_new_session=True)
        self.buf = b""

    def send(self, path):
        self.p.stdin.write((path + "\n").encode())
        self.p.stdin.flush()

    def rss_bytes(self):
        try:
            with open(f"/proc/{self.p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def read_line(self, deadline, max_rss):
        """A decoded JSON line, or 'timeout', 'dead', 'rss'."""
        fd = self.p.stdout.fileno()
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl], self.buf[nl + 1:]
                return json.loads(line)
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            r, _, _ = select.select([fd], [], [], min(0.25, deadline - now))
            if r:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return "dead"
                self.buf += chunk
            elif max_rss and self.rss_bytes() > max_rss:
                return "rss"

    def kill(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.p.wait(timeout=30)
        except Exception:
            pass

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except Exception:
            self.kill()


def nearest_rank(sorted_vals, p):
    if not sorted_vals:
        return None
    k = max(1, math.ceil(p / 100.0 * len(sorted_vals)))
    return sorted_vals[k - 1]


def pct_us(vals_ns):
    v = sorted(vals_ns)

    def us(x):
        return None if x is None else round(x / 1000.0, 1)

    return {"p50": us(nearest_rank(v, 50)), "p90": us(nearest_rank(v, 90)),
            "p99": us(nearest_rank(v, 99)), "max": us(v[-1] if v else None)}


def list_files(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files.extend(sorted(os.path.join(p, n) for n in os.listdir(p)
                                if n.endswith(".json") and not n.startswith(".")))
        else:
            files.append(p)
    return files


def engine_version(engine):
    try:
        from importlib.metadata import version
        return version(engine)
    except Exception:
        return None


def parent_main(args):
    files = list_files(args.paths)
    if not files:
        sys.exit("run_peer: no MaskBench files given")
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
        env[k] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    argv = [sys.executable, os.path.abspath(__file__), "--worker", "--engine", args.engine,
            "--tokenizer", args.tokenizer]
    if args.xgr_compliant:
        argv.append("--xgr-compliant")
    max_rss = int(args.max_rss_gib * (1 << 30)) if args.max_rss_gib > 0 else 0

    counts = {k: 0 for k in ("passing", "compile_error", "validation_error",
                             "invalidation_error", "timeout", "crash")}
    ttfm_all, tbm_all, mask_all = [], [], []
    worker = None
    t_start = time.monotonic()

    def start_worker():
        w = Worker(argv, env)
        hello = w.read_line(time.monotonic() + 600, 0)
        if not isinstance(hello, dict) or hello.get("event") != "ready":
            w.kill()
            sys.exit(f"run_peer: the {args.engine} worker did not start ({hello})")
        return w

    for n, path in enumerate(files):
        if worker is None:
            worker = start_worker()
        worker.send(path)
        deadline = time.monotonic() + args.timeout_s
        ttfm = None
        rec = {"file": os.path.basename(path)}
        while True:
            msg = worker.read_line(deadline, max_rss)
            if isinstance(msg, dict) and msg.get("event") == "compiled":
                ttfm = msg["ttfm_ns"]
                continue
            break
        if isinstance(msg, dict):
            outcome = msg["outcome"]
            if "ttfm_ns" in msg:
                ttfm = msg["ttfm_ns"]
            tbm = msg.get("masks_ns", [])
            if msg.get("error"):
                rec["error"] = msg["error"]
        else:
            rc = None
            if msg == "dead":
                try:
                    rc = worker.p.wait(timeout=10)
                except Exception:
                    pass
            worker.kill()
            worker = None
            tbm = []
            if msg == "timeout":
                outcome = "timeout"
                rec["error"] = f"no answer within {args.timeout_s} s" + (
                    "" if ttfm is not None else " (before the first mask)")
                if ttfm is None:
                    ttfm = int(args.timeout_s * 1e9)
            else:
                outcome = "crash"
                rec["error"] = ("resident memory over %.1f GiB" % args.max_rss_gib) if msg == "rss" \
                    else f"worker died (exit status {rc})"
        counts[outcome] += 1
        if ttfm is not None:
            ttfm_all.append(ttfm)
        if args.tbm == "mask":
            tbm_all.extend(m for _, m in tbm)
        else:
            tbm_all.extend(c + m for c, m in tbm)
        mask_all.extend(m for _, m in tbm)
        rec["outcome"] = outcome
        rec["ttfm_us"] = None if ttfm is None else round(ttfm / 1000.0, 1)
        rec["masks"] = len(tbm) + (1 if ttfm is not None and outcome not in ("timeout", "crash") else 0)
        if args.per_schema:
            ordered = {k: rec[k] for k in ("file", "outcome", "ttfm_us", "masks") }
            if "error" in rec:
                ordered["error"] = rec["error"]
            print(json.dumps(ordered, ensure_ascii=False), flush=True)
        if args.progress and (n + 1) % args.progress == 0:
            print(f"run_peer[{args.engine}]: {n + 1}/{len(files)} {counts} "
                  f"{time.monotonic() - t_start:.0f}s", file=sys.stderr, flush=True)
    if worker is not None:
        worker.close()

    summary = {"engine": args.engine, "version": engine_version(args.engine)}
    if args.engine == "xgrammar":
        summary["config"] = ("compliant: any_whitespace=True, strict_mode=False" if args.xgr_compliant
                             else "maskbench default: any_whitespace=False, strict_mode=True")
    else:
        summary["config"] = "default JSON options (flexible whitespace, lenient=false)"
    summary["schemas"] = len(files)
    summary.update(counts)
    summary["ttfm_us"] = pct_us(ttfm_all)
    summary["tbm_us"] = pct_us(tbm_all)
    summary["tbm"] = "mask" if args.tbm == "mask" else "consume+mask"
    summary["tbm_samples"] = len(tbm_all)
    summary["mask_only_us"] = pct_us(mask_all)
    summary["wall_s"] = round(time.monotonic() - t_start, 1)
    print(json.dumps(summary), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", required=True, choices=sorted(ENGINES))
    ap.add_argument("--tokenizer", required=True, help="Hugging Face tokenizer.json (Llama 3)")
    ap.add_argument("--per-schema", action="store_true", help="one JSON line per schema before the summary")
    ap.add_argument("--timeout-s", type=float, default=60.0, help="wall time per schema (default 60)")
    ap.add_argument("--max-rss-gib", type=float, default=8.0,
                    help="kill a worker whose resident memory passes this (crash); 0 = no limit (default 8)")
    ap.add_argument("--xgr-compliant", action="store_true",
                    help="XGrammar with any_whitespace=True, strict_mode=False (MaskBench's --xgr-compliant) "
                         "instead of MaskBench's default XGrammar configuration")
    ap.add_argument("--tbm", choices=("step", "mask"), default="step",
                    help="what a TBM sample is: 'step' = consuming the token + computing the next mask "
                         "(MaskBench's, the default), 'mask' = computing the mask only; the summary also "
                         "always gives mask_only_us")
    ap.add_argument("--progress", type=int, default=50, metavar="N",
                    help="a progress line on standard error every N schemas (0: none)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("paths", nargs="*", metavar="PATH")
    args = ap.parse_args()
    if args.worker:
        worker_main(args)
    else:
        if not args.paths:
            ap.error("give MaskBench files or folders")
        parent_main(args)


if __name__ == "__main__":
    main()
