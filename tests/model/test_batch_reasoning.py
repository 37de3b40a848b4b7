"""`sieve generate --batch --reasoning-parser` (src/cli/cmd_generate_batch.c): chat lines think
in <think>...</think> before their constraint applies, as the server's chat completions do
(tests/server/test_reasoning.py).

A tiny random-weight Qwen3 GGUF (tests/fixtures/make_tiny_llama.py) with a Qwen3-style think
template. Its vocabulary is the 256 bytes, so "</think>" is 8 byte tokens that random weights
practically never write: every reasoning here ends by its budget, and reasoning_tokens is the
budget plus the 8 tokens of the forced tag (plus at most 3 that finish a UTF-8 character).
Checked: the answer validates against the line's schema (jsonschema) or matches its regex, the
reasoning is split out (no tags in either part), the run's default budget and a line's own
apply, enable_thinking false and plain lines do not reason, and the fields are refused where
nothing would apply them."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import make_tiny_llama as tiny  # noqa: E402

END_TOKENS = 8  # "</think>", one byte token each
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 4}},
          "required": ["a", "b"], "additionalProperties": False}


def sieve():
    b = os.environ.get("SIEVE_BIN")
    assert b and os.access(b, os.X_OK), "SIEVE_BIN must name the sieve binary"
    return b


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("think") / "think.gguf"
    cfg = tiny.make_config("qwen3")
    cfg["context"] = 1024
    tiny.write_gguf(path, cfg, tiny.make_weights(cfg), chat_template=tiny.QWEN3_THINK_TEMPLATE)
    return path


def run(tmp_path, model, lines, *extra):
    f = tmp_path / "in.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = subprocess.run([sieve(), "generate", "--batch", str(f), "-m", str(model), "--threads", "2", *extra],
                       capture_output=True, timeout=300)
    return r.returncode, [json.loads(s) for s in r.stdout.decode().splitlines()], r.stderr.decode(errors="replace")


def forced_after(rt, budget):
    return budget + END_TOKENS <= rt <= budget + END_TOKENS + 3


@pytest.mark.parametrize("parser", ["qwen3", "deepseek_r1"])
def test_chat_lines_reason_then_answer(tmp_path, model, parser):
    lines = [
        {"prompt": "Hi", "chat": True, "schema": SCHEMA, "max_tokens": 200, "max_reasoning_tokens": 12, "seed": 1},
        {"prompt": "Hi", "chat": True, "schema": SCHEMA, "max_tokens": 200, "seed": 2, "n": 2},
        {"prompt": "Yo", "chat": True, "regex": "[a-z]{3,6}", "max_tokens": 60, "max_reasoning_tokens": 0},
    ]
    rc, out, err = run(tmp_path, model, lines, "--reasoning-parser", parser, "--max-reasoning-tokens", "20")
    assert rc == 0, err
    assert [o["index"] for o in out] == [0, 1, 2]
    budgets = [12, 20, 20, 0]
    choices = out[0]["outputs"] + out[1]["outputs"] + out[2]["outputs"]
    assert len(choices) == 4
    for c, budget in zip(choices, budgets):
        assert "error" not in c, c
        assert forced_after(c["reasoning_tokens"], budget), (parser, budget, c)
        for part in (c["text"], c["reasoning"]):
            assert "<think>" not in part and "</think>" not in part, c
    for c in out[0]["outputs"] + out[1]["outputs"]:
        jsonschema.validate(json.loads(c["text"]), SCHEMA)
    assert re.fullmatch("[a-z]{3,6}", out[2]["outputs"][0]["text"]), out[2]
    # the reasoning counts in the completion, as the server's usage counts it
    assert out[0]["completion_tokens"] >= out[0]["outputs"][0]["reasoning_tokens"]


def test_lines_that_do_not_reason(tmp_path, model):
    lines = [
        {"prompt": "Hi", "chat": True, "schema": SCHEMA, "max_tokens": 120, "enable_thinking": False},
        {"prompt": "plain text", "schema": SCHEMA, "max_tokens": 120},
    ]
    rc, out, err = run(tmp_path, model, lines, "--reasoning-parser", "qwen3")
    assert rc == 0, err
    for o in out:
        c = o["outputs"][0]
        assert "reasoning" not in c and "reasoning_tokens" not in c, o
        jsonschema.validate(json.loads(c["text"]), SCHEMA)


def test_reasoning_fields_refused_where_nothing_applies_them(tmp_path, model):
    rc, out, err = run(tmp_path, model, [
        {"prompt": "Hi", "chat": True, "max_tokens": 8, "max_reasoning_tokens": 4},
        {"prompt": "Hi", "chat": True, "max_tokens": 8, "enable_thinking": True},
        {"prompt": "Hi", "chat": True, "max_tokens": 8},
    ])
    assert rc == 0, err
    for o in out[:2]:
        assert o["error"]["type"] == "arg" and "no reasoning parser" in o["error"]["message"], o
    assert "outputs" in out[2]
    rc, out, err = run(tmp_path, model, [
        {"prompt": "Hi", "max_tokens": 8, "max_reasoning_tokens": 4},
        {"prompt": "Hi", "chat": True, "max_tokens": 8, "max_reasoning_tokens": -1},
        {"prompt": "Hi", "chat": True, "max_tokens": 8, "enable_thinking": "yes"},
    ], "--reasoning-parser", "qwen3")
    assert rc == 0, err
    assert "only chat lines reason" in out[0]["error"]["message"], out[0]
    assert out[1]["error"]["type"] == "arg" and "max_reasoning_tokens" in out[1]["error"]["message"], out[1]
    assert out[2]["error"]["type"] == "arg" and "enable_thinking" in out[2]["error"]["message"], out[2]
    for extra in (["--max-reasoning-tokens", "4"], ["--reasoning-parser", "o1"]):
        rc, out, err = run(tmp_path, model, [{"prompt": "Hi"}], *extra)
        assert rc == 64 and out == [], (extra, rc, err)  # usage errors exit 64 (src/cli/cli.h)


def test_sieve_batch_takes_the_servers_reasoning_parser(tmp_path, model):
    """`sieve batch` runs the server in process with every serve option, --reasoning-parser
    included: OpenAI batch lines get reasoning_content and a validated answer."""
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "x", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 120,
                     "max_reasoning_tokens": 5, "seed": 4,
                     "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}}}
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps(line) + "\n")
    r = subprocess.run([sieve(), "batch", "-m", str(model), "-i", str(src), "-o", str(out), "--quiet",
                        "--reasoning-parser", "qwen3", "--threads", "2"], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    body = json.loads(out.read_text())["response"]["body"]
    msg = body["choices"][0]["message"]
    jsonschema.validate(json.loads(msg["content"]), SCHEMA)
    assert isinstance(msg["reasoning_content"], str) and "</think>" not in msg["reasoning_content"]
    assert forced_after(body["usage"]["completion_tokens_details"]["reasoning_tokens"], 5), body["usage"]
