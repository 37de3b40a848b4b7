"""`sieve generate --batch` on the default model (SmolLM2-135M-Instruct, Q4_1 GGUF).

One batch run (module fixture) of a JSONL file that mixes chat and plain
prompts, schema / regex / unconstrained lines, greedy and seeded sampling,
and bad lines, checked for:

- constrained outputs: every schema output validates with jsonschema, every
  regex output matches with Python's re;
- batch invariance: each greedy line's text equals `sieve generate` run alone
  with the same options (the CPU backend is batch-invariant, so a wrong
  scheduler, prompt encoding or detokenization shows up as a text diff);
- bad lines (invalid JSON, missing prompt, uncompilable schema, n out of
  range, bad stop / logprobs / top_logprobs values, a budget the schema
  cannot fit) give error lines at their index while the good lines still
  run;
- output order equals input order, one line per input line, one output per
  choice;
- n: greedy choices are identical and equal the sequential text; sampled
  choice 0 equals the same line with n = 1;
- stop strings: the text is the stop-free text cut at the first occurrence,
  finish "stop" with the string as stop_reason; constrained text is not cut;
- logprobs: one entry per token whose bytes spell the text, top lists
  sorted and bounded, greedy picks the top token, forced tokens equal to
  what --no-jump-forward reports at the same position;
- --stats FILE: the engine's counters, consistent with the outputs, and
  jump-forward off forces nothing and takes more steps.

Needs SIEVE_BIN (the sieve binary) and the model that scripts/fetch-model.sh
installs; both missing is a failure, not a skip.
"""
import json
import math
import os
import re
import subprocess
from pathlib import Path

import jsonschema
import lark
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
ANSWER = {"type": "object", "properties": {"answer": {"enum": ["yes", "no", "maybe"]}}, "required": ["answer"]}
LONG = {"type": "object", "properties": {"a": {"type": "string", "minLength": 40}}, "required": ["a"]}
YEAR = r" (19|20)[0-9]{2}"
NAMES = r"[A-Z][a-z]+, [A-Z][a-z]+"

# A recursive GBNF grammar (docs/grammar.md) and lark's reading of it: an
# independent parser checks the outputs.
LIST_GBNF = 'root ::= list\nlist ::= "[" ( item ( ", " item )* )? "]"\nitem ::= [a-z]+ | list\n'
LIST_LARK = 'start: list\nlist: "[" (item (", " item)*)? "]"\nitem: WORD | list\nWORD: /[a-z]+/\n'

# (line, kind): kind "ok" lines must run, anything else names the error.
LINES = [
    ({"prompt": "What is the capital of France?", "chat": True, "temperature": 0, "max_tokens": 24}, "ok"),
    ({"prompt": "Once upon a time", "temperature": 0, "max_tokens": 16}, "ok"),
    ("{this is not json", "syntax"),
    ({"prompt": "Describe a person as JSON.", "chat": True, "schema": PERSON, "temperature": 0, "max_tokens": 48},
     "ok"),
    ({"chat": True, "max_tokens": 8}, "missing prompt"),
    ({"prompt": "Is the sky blue? Reply in JSON.", "chat": True, "schema": ANSWER, "temperature": 1, "seed": 5,
      "max_tokens": 32}, "ok"),
    ({"prompt": "x", "schema": {"type": "object", "properties": {"a": {"type": "strin"}}}}, "schema"),
    ({"prompt": "The year was", "regex": YEAR, "temperature": 0, "max_tokens": 10}, "ok"),
    ({"prompt": "x", "n": 17}, "n"),
    ({"prompt": "x", "n": 0}, "n"),
    ({"prompt": "x", "stop": ["a", 3]}, "stop"),
    ({"prompt": "x", "stop": [str(i) for i in range(9)]}, "stop"),
    ({"prompt": "x", "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"prompt": "x", "top_logprobs": 2}, "top_logprobs"),
    ({"prompt": "x", "logprobs": 1}, "logprobs"),
    ({"prompt": "Two names:", "regex": NAMES, "temperature": 1, "seed": 11, "max_tokens": 20}, "ok"),
    ({"prompt": "x", "schema": LONG, "max_tokens": 3}, "budget"),
    ({"prompt": "List three fruits.", "chat": True, "temperature": 0.8, "top_p": 0.9, "max_tokens": 20}, "ok"),
    ({"prompt": "The best thing about Mondays is", "temperature": 0, "max_tokens": 12}, "ok"),
    ({"prompt": "Once upon a time", "temperature": 0, "max_tokens": 16, "n": 3}, "ok"),
    ({"prompt": "List three fruits.", "chat": True, "temperature": 0.8, "top_p": 0.9, "max_tokens": 20, "n": 4},
     "ok"),
    ({"prompt": "Describe a person as JSON.", "chat": True, "schema": PERSON, "temperature": 1, "seed": 9,
      "max_tokens": 48, "n": 3, "logprobs": True, "top_logprobs": 3, "stop": ["\"", "name"]}, "ok"),
    ({"prompt": "The best thing about Mondays is", "temperature": 0, "max_tokens": 12, "logprobs": True,
      "top_logprobs": 5}, "ok"),
    ({"prompt": "A nested list:", "grammar": LIST_GBNF, "temperature": 1, "seed": 4, "max_tokens": 40}, "ok"),
    ({"prompt": "x", "grammar": 'root ::= "a" ('}, "grammar"),
    ({"prompt": "x", "grammar": LIST_GBNF, "regex": YEAR}, "two constraints"),
]


def sieve():
    b = os.environ.get("SIEVE_BIN")
    assert b and os.access(b, os.X_OK), "SIEVE_BIN must name the sieve binary"
    assert MODEL.is_file(), f"{MODEL} is missing: scripts/fetch-model.sh fetches it"
    return b


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    f = tmp_path_factory.mktemp("batch") / "in.jsonl"
    f.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x, _ in LINES))
    r = subprocess.run([sieve(), "generate", "--batch", str(f), "-m", str(MODEL), "--threads", "2",
                        "--max-num-seqs", "4"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    out = [json.loads(s) for s in r.stdout.decode().splitlines()]
    return out, r.stderr.decode()


def test_order_and_counts(batch):
    out, err = batch
    assert [o["index"] for o in out] == list(range(len(LINES)))
    assert f"{len(LINES)} requests" in err and "preemptions" in err, err
    for o, (_, kind) in zip(out, LINES):
        if kind != "ok":
            continue
        assert "error" not in o, o
        line = LINES[o["index"]][0]
        assert [c["index"] for c in o["outputs"]] == list(range(line.get("n", 1))), o
        assert all(c["finish_reason"] in ("stop", "length") for c in o["outputs"]), o
        assert o["prompt_tokens"] > 0 and 0 < o["completion_tokens"] and o["cached_tokens"] >= 0, o


def test_bad_lines_are_errors_at_their_index(batch):
    out, _ = batch
    expect = {"syntax": ("syntax", "JSON"), "missing prompt": ("arg", "prompt"), "schema": ("syntax", "strin"),
              "n": ("arg", "n:"), "stop": ("arg", "stop:"), "top_logprobs": ("arg", "top_logprobs:"),
              "logprobs": ("arg", "logprobs:"), "budget": ("budget", "needs at least"),
              "grammar": ("syntax", "line 1, column 14"), "two constraints": ("arg", "at most one")}
    for i, (o, (_, kind)) in enumerate(zip(out, LINES)):
        if kind == "ok":
            continue
        assert "outputs" not in o and o["index"] == i, o
        typ, word = expect[kind]
        assert o["error"]["type"] == typ and word in o["error"]["message"], (kind, o)


def test_constrained_outputs_are_valid(batch):
    out, _ = batch
    n = 0
    for o, (line, kind) in zip(out, LINES):
        if kind != "ok" or isinstance(line, str):
            continue
        for c in o["outputs"]:
            text = c["text"]
            if "schema" in line:
                # stop strings ("\"", "name") must not cut constrained text
                jsonschema.Draft202012Validator(line["schema"]).validate(json.loads(text))
                assert c["finish_reason"] == "stop" and c.get("stop_reason") in (None, "budget"), o
                n += 1
            elif "regex" in line:
                assert re.fullmatch(line["regex"], text), (line["regex"], text)
                assert c["finish_reason"] == "stop", o
                n += 1
            elif "grammar" in line:
                lark.Lark(LIST_LARK, parser="earley", lexer="dynamic").parse(text)  # raises when not in it
                assert c["finish_reason"] == "stop", o
                n += 1
    assert n == 4 + 3 + 1


def alone(line):
    args = [sieve(), "generate", "-m", str(MODEL), "--threads", "2", "-p", line["prompt"], "--temperature", "0",
            "--max-tokens", str(line.get("max_tokens", 256))]
    if line.get("chat"):
        args.append("--chat")
    if "regex" in line:
        args += ["--regex", line["regex"]]
    return args


def test_greedy_lines_equal_the_sequential_path(batch, tmp_path):
    out, _ = batch
    n = 0
    for o, (line, kind) in zip(out, LINES):
        if kind != "ok" or line.get("temperature") != 0:
            continue
        # greedy choices are all the same text
        assert all(c["text"] == o["outputs"][0]["text"] for c in o["outputs"]), o
        args = alone(line)
        if "schema" in line:
            f = tmp_path / f"s{n}.json"
            f.write_text(json.dumps(line["schema"]))
            args += ["--schema", str(f)]
        r = subprocess.run(args, capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        seq = r.stdout.decode()
        assert seq.endswith("\n")
        assert o["outputs"][0]["text"] == seq[:-1], (line, o, seq)
        fin = re.search(r"finish (stop|length)", r.stderr.decode()).group(1)
        assert o["outputs"][0]["finish_reason"] == fin, (line, o, r.stderr)
        n += 1
    assert n == 7


def test_preemption_does_not_change_the_text(tmp_path):
    # Four plain greedy lines whose outputs outgrow a 3 MB KV cache (4 blocks
    # of 16 positions) together: the engine preempts and recomputes, and the
    # texts must equal those of a roomy run.
    f = tmp_path / "grow.jsonl"
    f.write_text("".join(json.dumps({"prompt": p, "temperature": 0, "max_tokens": 40}) + "\n"
                         for p in ("Once upon a time", "The weather today", "My favourite food", "In the year 3000")))

    def run(*extra):
        r = subprocess.run([sieve(), "generate", "--batch", str(f), "-m", str(MODEL), "--threads", "2", *extra],
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return [json.loads(s)["outputs"][0] for s in r.stdout.decode().splitlines()], r.stderr.decode()

    roomy, _ = run()
    tight, err = run("--kv-memory-mb", "3")
    n = int(re.search(r"(\d+) preemptions", err).group(1))
    assert n > 0, err
    assert tight == roomy


def run_batch(tmp_path, lines, *extra, name="in.jsonl"):
    f = tmp_path / name
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = subprocess.run([sieve(), "generate", "--batch", str(f), "-m", str(MODEL), "--threads", "2", *extra],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return [json.loads(s) for s in r.stdout.decode().splitlines()]


def test_sampled_choice_zero_is_the_single_run(batch, tmp_path):
    out, _ = batch
    i = next(i for i, (x, k) in enumerate(LINES) if k == "ok" and x.get("n") == 4)
    line = dict(LINES[i][0], n=1, seed=i)  # the batch's default seed is the line's index
    single = run_batch(tmp_path, [line])[0]["outputs"][0]
    texts = [c["text"] for c in out[i]["outputs"]]
    assert texts[0] == single["text"], (texts, single)
    assert len(set(texts)) > 1, texts


def first_stop(text, stops):
    best = None
    for p in range(len(text)):
        for i, s in enumerate(stops):
            if text.startswith(s, p):
                return p, i
    return best


def test_stop_strings_cut_at_the_first_occurrence(tmp_path):
    prompts = ["Once upon a time", "The weather today", "My favourite food is"]
    base = [{"prompt": p, "temperature": 0, "max_tokens": 40, "n": 2} for p in prompts]
    full = [o["outputs"][0]["text"] for o in run_batch(tmp_path, base, name="full.jsonl")]
    lines, stops = [], []
    for line, text in zip(base, full):
        words = text.split()
        assert len(words) > 4, text
        # a word from the middle, one that never occurs, and a longer
        # candidate sharing the word's start (held back, then dropped)
        st = [words[len(words) // 2] + "\u00e9\u00e9", " " + words[len(words) // 2], "zq\u20ac"]
        stops.append(st)
        lines.append(dict(line, stop=st))
    lines.append({"prompt": "Once upon a time", "temperature": 0, "max_tokens": 40, "stop": "never-in-the-text"})
    out = run_batch(tmp_path, lines, name="stop.jsonl")
    for o, text, st in zip(out, full, stops):
        p, i = first_stop(text, st)
        for c in o["outputs"]:
            assert c["text"] == text[:p], (c, text, st)
            assert c["finish_reason"] == "stop" and c["stop_reason"] == st[i], c
        assert o["completion_tokens"] < 2 * 40, o
    last = out[-1]["outputs"][0]
    assert last["text"] == full[0] and "stop_reason" not in last, last


def test_logprobs(batch):
    out, _ = batch
    n = 0
    for o, (line, kind) in zip(out, LINES):
        if kind != "ok" or not line.get("logprobs"):
            assert kind != "ok" or all("logprobs" not in c for c in o["outputs"]), o
            continue
        for c in o["outputs"]:
            content = c["logprobs"]["content"]
            assert content, c
            text = bytes(b for t in content for b in t["bytes"]).decode("utf-8", errors="replace")
            assert text == c["text"], (text, c["text"])
            for t in content:
                top = t["top_logprobs"]
                assert 1 <= len(top) <= line["top_logprobs"], t
                assert all(a["logprob"] >= b["logprob"] for a, b in zip(top, top[1:])), t
                assert t["logprob"] <= 0 and sum(math.exp(x["logprob"]) for x in top) <= 1 + 1e-4, t
                assert t["logprob"] <= top[0]["logprob"] + 1e-6, t
                if line.get("temperature") == 0:
                    assert t["token"] == top[0]["token"] and t["logprob"] == top[0]["logprob"], t
            n += 1
    assert n == 3 + 1


def test_forced_logprobs_and_stats(tmp_path):
    # A key-heavy schema: jump-forward forces the keys and punctuation. With
    # --no-jump-forward and logit steering absent, greedy may split differently,
    # so the logprob of a forced token is compared where the texts agree up to
    # it: the same token there has the same logprob, and otherwise the forced
    # token shows up in the other run's top list with that logprob.
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in ("alpha", "beta", "gamma")},
              "required": ["alpha", "beta", "gamma"], "additionalProperties": False}
    lines = [{"prompt": p, "chat": True, "schema": schema, "temperature": 0, "max_tokens": 60, "logprobs": True,
              "top_logprobs": 20} for p in ("Give three numbers as JSON.", "JSON please.")]
    on_stats, off_stats = tmp_path / "on.json", tmp_path / "off.json"
    on = run_batch(tmp_path, lines, "--stats", str(on_stats), name="on.jsonl")
    off = run_batch(tmp_path, lines, "--no-jump-forward", "--stats", str(off_stats), name="off.jsonl")
    son, soff = json.loads(on_stats.read_text()), json.loads(off_stats.read_text())
    keys = {"steps", "rows", "cached_tokens", "sampled", "dev_sampled", "forced", "rollbacks", "preemptions",
            "running", "waiting", "max_running", "prefix_queries", "prefetched", "mask_waits", "step_ns",
            "forward_ns", "hook_ns", "mask_ns", "sample_ns"}
    assert set(son) == keys and set(soff) == keys, son
    assert son["dev_sampled"] == soff["dev_sampled"] == 0, (son, soff)  # the CPU samples on the host
    for s in (son, soff):  # the time split: parts within the whole, the hook only on a device
        assert s["step_ns"] >= s["forward_ns"] > 0 and s["hook_ns"] == 0, s
        assert s["step_ns"] - s["forward_ns"] >= s["sample_ns"] > 0 and s["mask_ns"] > 0, s
    assert son["forced"] > 0 and soff["forced"] == 0 and soff["rollbacks"] == 0, (son, soff)
    assert soff["steps"] > son["steps"], (son, soff)
    for s, res in ((son, on), (soff, off)):
        total = sum(o["completion_tokens"] for o in res)
        assert s["sampled"] + s["forced"] - s["rollbacks"] >= total, (s, total)
        assert s["rows"] >= sum(o["prompt_tokens"] for o in res) and s["running"] == 0 and s["waiting"] == 0, s
    compared = diverged = 0
    for a, b in zip(on, off):
        ca, cb = a["outputs"][0], b["outputs"][0]
        for c in (ca, cb):
            jsonschema.validate(json.loads(c["text"]), schema)
        ta, tb = ca["logprobs"]["content"], cb["logprobs"]["content"]
        for x, y in zip(ta, tb):
            if x["bytes"] == y["bytes"]:
                assert x["logprob"] == y["logprob"] and x["top_logprobs"] == y["top_logprobs"], (x, y)
            else:
                # greedy with the same state picks the same token unless x
                # was forced: a forced token, checked against the other run
                alt = [t for t in y["top_logprobs"] if t["bytes"] == x["bytes"]]
                assert alt and alt[0]["logprob"] == x["logprob"], (x, y)
                diverged += 1
                break
            compared += 1
    assert diverged >= 1, (compared, diverged)


def test_int8_kernels_are_batch_invariant(tmp_path):
    # --cpu-kernels int8 (8-bit activations, integer products): a line's text is the same
    # whether it shares its steps with 7 others, runs with one sequence at a time, or runs
    # alone through `sieve generate`, bit for bit (greedy ties included).
    prompts = ["Once upon a time", "The weather today", "My favourite food", "In the year 3000",
               "Dear diary,", "The recipe calls for", "Breaking news:", "The three laws are"]
    lines = [{"prompt": p, "temperature": 0, "max_tokens": 24} for p in prompts]
    together = [o["outputs"][0] for o in run_batch(tmp_path, lines, "--cpu-kernels", "int8", "--max-num-seqs", "8")]
    one_by_one = [o["outputs"][0] for o in run_batch(tmp_path, lines, "--cpu-kernels", "int8", "--max-num-seqs", "1",
                                                     name="one.jsonl")]
    assert together == one_by_one
    for p, o in zip(prompts[:3], together):
        r = subprocess.run([sieve(), "generate", "-m", str(MODEL), "-p", p, "--temperature", "0", "--max-tokens", "24",
                            "--threads", "1", "--cpu-kernels", "int8"], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        assert r.stdout.decode()[:-1] == o["text"], (p, o)
    # and the kernels change the arithmetic: some text differs from the fp32 path's
    ref = [o["outputs"][0]["text"] for o in run_batch(tmp_path, lines, "--cpu-kernels", "ref", "--max-num-seqs", "8",
                                                      name="ref.jsonl")]
    assert ref != [o["text"] for o in together]


@pytest.mark.parametrize("extra, want", [
    (["--device", "cpu", "--gpu-memory-utilization", "0.5"], "applies to a CUDA device only"),
    (["--device", "cpu", "--gpu-memory-utilization", "0.5", "--kv-memory-mb", "64"], "not both"),
    (["--gpu-memory-utilization", "1.5"], "invalid value '1.5' for --gpu-memory-utilization"),
    (["--gpu-memory-utilization", "0"], "invalid value '0' for --gpu-memory-utilization"),
    (["--gpu-memory-utilization", "nan"], "invalid value 'nan' for --gpu-memory-utilization"),
])
def test_gpu_memory_utilization_refusals(tmp_path, extra, want):
    """--gpu-memory-utilization sizes the KV cache on CUDA only (the emulated
    device runs it: tests/gpu/emu/run.sh); anywhere else, and with a value
    outside (0, 1] or beside --kv-memory-mb, it is a clear error."""
    f = tmp_path / "in.jsonl"
    f.write_text(json.dumps({"prompt": "x", "max_tokens": 2}) + "\n")
    r = subprocess.run([sieve(), "generate", "--batch", str(f), "-m", str(MODEL), "--threads", "2", *extra],
                       capture_output=True, timeout=60)
    assert r.returncode != 0
    assert want in r.stderr.decode(errors="replace"), r.stderr.decode(errors="replace")
