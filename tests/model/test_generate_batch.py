"""`sieve generate --batch` on the default model (SmolLM2-135M-Instruct, Q4_1 GGUF).

One batch run (module fixture) of a JSONL file that mixes chat and plain
prompts, schema / regex / unconstrained lines, greedy and seeded sampling,
and bad lines, checked for:

- constrained outputs: every schema output validates with jsonschema, every
  regex output matches with Python's re;
- batch invariance: each greedy line's text equals `sieve generate` run alone
  with the same options (the CPU backend is batch-invariant, so a wrong
  scheduler, prompt encoding or detokenization shows up as a text diff);
- bad lines (invalid JSON, missing prompt, uncompilable schema, n = 2, a
  budget the schema cannot fit) give error lines at their index while the
  good lines still run;
- output order equals input order, one line per input line.

Needs SIEVE_BIN (the sieve binary) and the model that scripts/fetch-model.sh
installs; both missing is a failure, not a skip.
"""
import json
import os
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
ANSWER = {"type": "object", "properties": {"answer": {"enum": ["yes", "no", "maybe"]}}, "required": ["answer"]}
LONG = {"type": "object", "properties": {"a": {"type": "string", "minLength": 40}}, "required": ["a"]}
YEAR = r" (19|20)[0-9]{2}"
NAMES = r"[A-Z][a-z]+, [A-Z][a-z]+"

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
    ({"prompt": "x", "n": 2}, "n"),
    ({"prompt": "Two names:", "regex": NAMES, "temperature": 1, "seed": 11, "max_tokens": 20}, "ok"),
    ({"prompt": "x", "schema": LONG, "max_tokens": 3}, "budget"),
    ({"prompt": "List three fruits.", "chat": True, "temperature": 0.8, "top_p": 0.9, "max_tokens": 20}, "ok"),
    ({"prompt": "The best thing about Mondays is", "temperature": 0, "max_tokens": 12}, "ok"),
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
        assert len(o["outputs"]) == 1 and o["outputs"][0]["finish_reason"] in ("stop", "length"), o
        assert o["prompt_tokens"] > 0 and 0 < o["completion_tokens"] and o["cached_tokens"] >= 0, o


def test_bad_lines_are_errors_at_their_index(batch):
    out, _ = batch
    expect = {"syntax": ("syntax", "JSON"), "missing prompt": ("arg", "prompt"), "schema": ("syntax", "strin"),
              "n": ("unsupported", "n"), "budget": ("budget", "needs at least")}
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
        text = o["outputs"][0]["text"]
        if "schema" in line:
            jsonschema.Draft202012Validator(line["schema"]).validate(json.loads(text))
            assert o["outputs"][0]["finish_reason"] == "stop", o
            n += 1
        elif "regex" in line:
            assert re.fullmatch(line["regex"], text), (line["regex"], text)
            assert o["outputs"][0]["finish_reason"] == "stop", o
            n += 1
    assert n == 4


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
    assert n == 5


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
