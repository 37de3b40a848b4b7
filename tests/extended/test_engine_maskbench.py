"""MaskBench schemas through the engine (`sieve generate --batch`), judged by jsonschema.

The constrained-decoding test of issue 6 on real-world schemas: a fixed,
checked-in list of MaskBench files (tests/extended/maskbench_engine.txt, at
least 100, over every MaskBench group that has an eligible file) runs as chat
requests on the default model (SmolLM2-135M-Instruct, Q4_1), all in one
batch, twice:

- at temperature 1.0 with max_tokens = the file's shortest valid instance in
  tokens + 32;
- at temperature 1.0 with max_tokens = that shortest instance + 5 (the budget
  rule must steer every output to a complete value).

The shortest instance is measured independently of the engine: each valid
test instance of the file, written as Python's json.dumps writes it (the
canonical whitespace mode's spelling, ensure_ascii=False), is tokenized with
the model's own tokenizer (tok_cli on the GGUF) and the fewest tokens taken.
Every output must be JSON that Python's jsonschema accepts under the schema's
own draft, format checking on, patterns as ECMA-262 (the judge of
tests/schema/test_sampling.py), end with finish reason "stop", and stay within
its budget. An up-front refusal ("needs at least N tokens") of a budget that a
valid instance fits is a failure too.

The list: `python3 tests/extended/test_engine_maskbench.py --select` rewrites
it. It walks tests/bench/maskbench_sample.txt (the stratified sample every
engine runs) group by group, round robin over the groups in name order, and
keeps a file when sieve compiles its schema with default options (within
COMPILE_TIMEOUT_S), it has a valid instance whose shortest token count is at
most MAX_SHORTEST, and a batch line can carry it (integers within 64 bits, no
NUL: jansson's limits), until WANT files are kept. Compile time is the only
machine-dependent criterion and every kept schema compiles in well under a
second, so the list is reproducible.

Needs SIEVE_BIN, TOK_CLI_BIN, SIEVE_SHARED_DATA (the folder holding
maskbench/) and the model that scripts/fetch-model.sh installs; anything
missing is a failure, not a skip.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "schema"))
sys.path.insert(0, str(ROOT / "tests" / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "model"))
from test_sampling import validator as judge  # noqa: E402
from test_batch_schemas import fits_int64  # noqa: E402  (a batch line's integers are 64-bit)
from maskbench_sample import subset_of  # noqa: E402

MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
LIST = Path(__file__).resolve().parent / "maskbench_engine.txt"
SAMPLE = ROOT / "tests" / "bench" / "maskbench_sample.txt"
WANT = 120              # files in the list
MAX_SHORTEST = 64       # selection: the shortest valid instance, in tokens
COMPILE_TIMEOUT_S = 20  # selection: a schema that takes longer is left out
MAX_COMPILE_S = 2.0     # selection: so is one that takes more than this alone: the batch compiles
                        # under the default 10 s budget, beside decoding, and on a loaded CI machine
                        # a 4 s schema (Github_medium---o11667) once ran past it
T1_EXTRA = 32           # the temperature-1 run's budget: shortest + this
TIGHT_EXTRA = 5         # the tight run's budget: shortest + this
PROMPT_CHARS = 400      # the schema's text in the prompt is cut to this
SEQS = 16               # --max-num-seqs
KEYS = 5                # key-heavy: the shortest valid instance has this many object keys


def env_path(var, what):
    p = os.environ.get(var)
    assert p, f"{var} must name {what}"
    return p


def sieve():
    b = env_path("SIEVE_BIN", "the sieve binary")
    assert os.access(b, os.X_OK), f"SIEVE_BIN={b} is not an executable"
    assert MODEL.is_file(), f"{MODEL} is missing: scripts/fetch-model.sh fetches it"
    return b


def tok_cli():
    b = env_path("TOK_CLI_BIN", "the tok_cli test binary")
    assert os.access(b, os.X_OK), f"TOK_CLI_BIN={b} is not an executable"
    return b


def maskbench_dir():
    d = Path(env_path("SIEVE_SHARED_DATA", "the shared data folder (../shared/data)")) / "maskbench"
    assert d.is_dir(), f"{d} is missing: this test needs the benchmark data (../shared/data, see its README)"
    return d


def canonical(value):
    """The spelling of the canonical whitespace mode: Python's json.dumps."""
    return json.dumps(value, ensure_ascii=False)


def token_counts(texts, tok=None):
    """Token counts of texts under the model's tokenizer (no BOS: the GGUF
    does not add one), one tok_cli run for all."""
    if not texts:
        return []
    inp = "".join(json.dumps(t) + "\n" for t in texts)
    r = subprocess.run([tok or tok_cli(), str(MODEL), "encode"], input=inp.encode(), capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    lines = r.stdout.decode().splitlines()
    assert len(lines) == len(texts), (len(lines), len(texts))
    return [len(l.split()) for l in lines]


def load(name, folder):
    d = json.loads((folder / name).read_text(encoding="utf-8"))
    return d["schema"], [t["data"] for t in d["tests"] if t["valid"]]


def prompt(schema):
    return "Reply with one JSON value for this schema: " + json.dumps(schema)[:PROMPT_CHARS]


def run_batch(lines, path, extra=()):
    """Runs the lines through `sieve generate --batch`; returns the output
    lines and the stderr summary."""
    path.write_text("".join(json.dumps(l) + "\n" for l in lines))
    r = subprocess.run([sieve(), "generate", "-m", str(MODEL), "--batch", str(path), "--max-num-seqs", str(SEQS),
                        "--threads", "2", *extra], capture_output=True, timeout=1200)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    outs = [json.loads(x) for x in r.stdout.decode().splitlines() if x.strip()]
    assert [o["index"] for o in outs] == list(range(len(lines)))
    return outs, r.stderr.decode(errors="replace")


def validator(schema):
    return judge(json.loads(json.dumps(schema), parse_float=Decimal))


def check(cases, budgets, outs):
    """Every output: no error line, JSON valid under jsonschema, finish
    reason stop, within budget. Reports all the bad ones at once."""
    bad = []
    for (name, schema, _), n, o in zip(cases, budgets, outs):
        if "error" in o:
            m = re.search(r"needs at least (\d+) tokens", o["error"].get("message", ""))
            why = (f"refused a budget of {n} tokens that a valid instance fits (engine: at least {m.group(1)})"
                   if m else f"error line {o['error']}")
            bad.append((name, why))
            continue
        out = o["outputs"][0]
        try:
            validator(schema).validate(json.loads(out["text"], parse_float=Decimal))
        except Exception as e:  # noqa: BLE001 - the message is the report
            bad.append((name, out["text"][:300], str(e)[:200]))
        if out["finish_reason"] != "stop":
            bad.append((name, f"finish_reason {out['finish_reason']}"))
        if o["completion_tokens"] > n:
            bad.append((name, f"{o['completion_tokens']} tokens over a budget of {n}"))
    assert not bad, f"{len(bad)} bad outputs of {len(outs)}: {bad[:20]}"


# ---------------------------------------------------------------- fixtures

def load_cases():
    """(name, schema, shortest valid instance in tokens) of every listed file."""
    folder = maskbench_dir()
    names = LIST.read_text().split()
    assert len(names) >= 100, f"{LIST} lists only {len(names)} files"
    outside = sorted(set(names) - set(SAMPLE.read_text().split()))
    assert not outside, f"{LIST} names files outside {SAMPLE}: {outside[:3]}"
    missing = [n for n in names if not (folder / n).is_file()]
    assert not missing, f"{len(missing)} listed files are not in {folder} (e.g. {missing[:3]}): another MaskBench copy?"
    loaded = [(n, *load(n, folder)) for n in names]
    texts, owner = [], []
    for i, (_, _, valid) in enumerate(loaded):
        for v in valid:
            texts.append(canonical(v))
            owner.append(i)
    counts = token_counts(texts)
    shortest = [None] * len(loaded)
    for i, c in zip(owner, counts):
        shortest[i] = c if shortest[i] is None else min(shortest[i], c)
    out = []
    for (n, schema, _), s in zip(loaded, shortest):
        assert s is not None, f"{n} has no valid instance"
        out.append((n, schema, s))
    groups = collections.Counter(subset_of(n) for n in names)
    assert len(groups) >= 10, f"the list covers only {len(groups)} MaskBench groups: {groups}"
    return out


@pytest.fixture(scope="module")
def cases():
    return load_cases()


def lines_for(cases, extra, seed0):
    return [{"prompt": prompt(s), "chat": True, "schema": s, "max_tokens": n + extra, "temperature": 1.0,
             "seed": seed0 + i} for i, (_, s, n) in enumerate(cases)]


def test_all_outputs_valid_at_temperature_1(cases, tmp_path):
    lines = lines_for(cases, T1_EXTRA, 100)
    outs, summary = run_batch(lines, tmp_path / "t1.jsonl")
    print(summary.strip().splitlines()[-1])
    check(cases, [l["max_tokens"] for l in lines], outs)


def test_shortest_instance_plus_5(cases, tmp_path):
    lines = lines_for(cases, TIGHT_EXTRA, 5000)
    outs, summary = run_batch(lines, tmp_path / "tight.jsonl")
    print(summary.strip().splitlines()[-1])
    budget_steered = sum(1 for o in outs if o.get("outputs") and o["outputs"][0].get("stop_reason") == "budget")
    print(f"{budget_steered} of {len(outs)} outputs ended by the budget")
    check(cases, [l["max_tokens"] for l in lines], outs)
    # The tight budget must bind somewhere, or this run checks nothing the
    # first one does not (at temperature 1 the model wanders on some).
    assert budget_steered > 0


# ---------------------------------------------------------------- jump-forward

def n_keys(v):
    if isinstance(v, dict):
        return len(v) + sum(n_keys(x) for x in v.values())
    if isinstance(v, list):
        return sum(n_keys(x) for x in v)
    return 0


def key_heavy(cases):
    """The listed files whose shortest valid instance has at least KEYS object
    keys: in the canonical whitespace mode every key and separator after the
    first character of a key is a forced path."""
    folder = maskbench_dir()
    out = []
    for c in cases:
        _, valid = load(c[0], folder)
        if n_keys(min(valid, key=lambda v: len(canonical(v)))) >= KEYS:
            out.append(c)
    return out


def test_jump_forward_saves_steps_and_stays_valid(cases, tmp_path):
    """Greedy decoding of the key-heavy schemas with jump-forward on and off
    (--no-jump-forward): on, the engine appends forced tokens (forced > 0)
    and so samples fewer tokens and runs fewer forward steps (from --stats);
    off, it forces none; every output of both runs is valid and complete.
    Prints how many greedy texts differ between the two runs: a forced
    segment is tokenized canonically, which is not always the split the
    model would have sampled (e.g. `nums` where the model takes `num` `s`),
    and the next tokens are conditioned on that split."""
    heavy = key_heavy(cases)
    assert len(heavy) >= 20, f"only {len(heavy)} key-heavy schemas in the list"
    lines = [{"prompt": prompt(s), "chat": True, "schema": s, "max_tokens": n + T1_EXTRA, "temperature": 0.0}
             for (_, s, n) in heavy]
    budgets = [l["max_tokens"] for l in lines]
    runs = {}
    for mode, extra in (("on", ()), ("off", ("--no-jump-forward",))):
        stats = tmp_path / f"{mode}.stats.json"
        outs, summary = run_batch(lines, tmp_path / f"jf-{mode}.jsonl", ("--stats", str(stats), *extra))
        check(heavy, budgets, outs)
        runs[mode] = (outs, json.loads(stats.read_text()))
        print(f"jump-forward {mode}: {summary.strip().splitlines()[-1]}")
    (on, s_on), (off, s_off) = runs["on"], runs["off"]
    print(f"stats on: {s_on}\nstats off: {s_off}")
    assert s_off["forced"] == 0 and s_off["rollbacks"] == 0, s_off
    assert s_on["forced"] > 0, s_on
    assert s_on["sampled"] < s_off["sampled"], (s_on, s_off)
    assert s_on["steps"] < s_off["steps"], (s_on, s_off)
    # Every output token was sampled or forced (a sampled end-of-text token
    # is not output, and a rolled-back token is replaced by a forced one).
    assert s_on["sampled"] + s_on["forced"] >= sum(o["completion_tokens"] for o in on), s_on
    assert s_off["sampled"] >= sum(o["completion_tokens"] for o in off), s_off
    differ = sum(a["outputs"][0]["text"] != b["outputs"][0]["text"] for a, b in zip(on, off))
    print(f"greedy texts that differ between jump-forward on and off: {differ} of {len(heavy)}")


# ---------------------------------------------------------------- the list

def eligible(name, folder, sieve_bin, tok):
    schema, valid = load(name, folder)
    if not valid or not isinstance(schema, dict) or not fits_int64(schema) or "\\u0000" in json.dumps(schema):
        return None
    try:
        r = subprocess.run([sieve_bin, "compile", "--schema", "-"], input=json.dumps(schema).encode(),
                           capture_output=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0 or json.loads(r.stdout)["compile_us"] > MAX_COMPILE_S * 1e6:
        return None
    n = min(token_counts([canonical(v) for v in valid], tok))
    return n if n <= MAX_SHORTEST else None


def select(folder, sieve_bin, tok):
    by_group = collections.defaultdict(list)
    for n in SAMPLE.read_text().split():
        by_group[subset_of(n)].append(n)
    queues = {g: collections.deque(by_group[g]) for g in sorted(by_group)}
    kept = []
    while len(kept) < WANT and any(queues.values()):
        for g, q in queues.items():
            while q and len(kept) < WANT:
                n = q.popleft()
                if eligible(n, folder, sieve_bin, tok) is not None:
                    kept.append(n)
                    break
    return kept


def main():
    ap = argparse.ArgumentParser(description="rewrite " + str(LIST.relative_to(ROOT)))
    ap.add_argument("--select", action="store_true", required=True)
    ap.add_argument("--sieve", default=str(ROOT / "build" / "sieve"))
    ap.add_argument("--tok-cli", default=str(ROOT / "build" / "tests" / "tok_cli"))
    ap.add_argument("--data", default=str(ROOT / ".." / "shared" / "data"))
    a = ap.parse_args()
    kept = select(Path(a.data) / "maskbench", a.sieve, a.tok_cli)
    if len(kept) < 100:
        sys.exit(f"only {len(kept)} eligible files")
    LIST.write_text("".join(n + "\n" for n in sorted(kept)))
    print(f"wrote {LIST}: {len(kept)} files, {dict(collections.Counter(subset_of(n) for n in kept))}")


if __name__ == "__main__":
    main()
