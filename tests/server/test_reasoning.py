"""Reasoning models (`sieve serve --reasoning-parser`, docs/api.md "Reasoning").

A tiny random-weight Qwen3 GGUF (tests/fixtures/make_tiny_llama.py) with a Qwen3-style think
template is served with --reasoning-parser qwen3. Its vocabulary is the 256 bytes, so "</think>"
is 8 byte tokens that random weights practically never write: every reasoning here ends by the
budget (max_reasoning_tokens, or the room the answer needs), and the usage's reasoning_tokens is
exactly budget + 8. Checked: the answer validates against the schema (jsonschema), the reasoning
is split out (no tags in either part), the stream sends every reasoning delta before any content
delta and concatenates to the non-streamed response of the same seed, the openai client reads
reasoning_content, logprobs cover the forced tag, and bad max_reasoning_tokens values are 400s
with OpenAI's error shape."""
import json
import sys
from pathlib import Path

import httpx2 as httpx
import jsonschema
import openai
import pytest

from live import NAME, Server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import make_tiny_llama as tiny  # noqa: E402

END_TOKENS = 8  # "</think>", one byte token each


def forced_after(rt, budget):
    """Whether rt reasoning tokens are budget tokens and then the forced end: the tag, after the
    rest of a UTF-8 character when the budget ran out inside one (at most 3 more bytes)."""
    return budget + END_TOKENS <= rt <= budget + END_TOKENS + 3
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 4}},
          "required": ["a", "b"], "additionalProperties": False}
RF = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}
ASK = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("think") / "think.gguf"
    cfg = tiny.make_config("qwen3")
    cfg["context"] = 1024  # room for the tools' system text, spelled one byte a token
    tiny.write_gguf(path, cfg, tiny.make_weights(cfg), chat_template=tiny.QWEN3_THINK_TEMPLATE)
    return path


@pytest.fixture(scope="module")
def srv(model):
    s = Server("--reasoning-parser", "qwen3", "--max-num-seqs", "4", model=model)
    yield s
    s.stop()


def chat(srv, **body):
    body.setdefault("messages", ASK)
    r = srv.post("/v1/chat/completions", body)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("seed", range(4))
def test_answer_validates_after_forced_reasoning(srv, seed):
    j = chat(srv, response_format=RF, max_tokens=80, max_reasoning_tokens=10, seed=seed, temperature=1)
    msg = j["choices"][0]["message"]
    jsonschema.validate(json.loads(msg["content"]), SCHEMA)
    assert isinstance(msg["reasoning_content"], str)
    for part in (msg["content"], msg["reasoning_content"]):
        assert "</think>" not in part and not part.startswith("<think>")
    assert forced_after(j["usage"]["completion_tokens_details"]["reasoning_tokens"], 10)
    assert j["choices"][0]["finish_reason"] == "stop"


def test_budget_zero_and_room_for_the_answer(srv):
    # max_reasoning_tokens 0: the tag at once, an empty reasoning.
    j = chat(srv, response_format=RF, max_tokens=60, max_reasoning_tokens=0, seed=3)
    assert j["choices"][0]["message"]["reasoning_content"] == ""
    assert j["usage"]["completion_tokens_details"]["reasoning_tokens"] == END_TOKENS
    jsonschema.validate(json.loads(j["choices"][0]["message"]["content"]), SCHEMA)
    # No budget of its own: the reasoning stops where the answer still fits in max_tokens.
    j = chat(srv, response_format=RF, max_tokens=40, seed=5, temperature=1)
    jsonschema.validate(json.loads(j["choices"][0]["message"]["content"]), SCHEMA)
    assert j["usage"]["completion_tokens"] <= 40
    assert END_TOKENS < j["usage"]["completion_tokens_details"]["reasoning_tokens"] < 40


def test_unconstrained_reasoning_is_split(srv):
    j = chat(srv, max_tokens=30, max_reasoning_tokens=5, seed=1)
    msg = j["choices"][0]["message"]
    assert forced_after(j["usage"]["completion_tokens_details"]["reasoning_tokens"], 5)
    assert len(msg["reasoning_content"].encode()) <= 5 * 3 + 3  # 5 tokens of at most 3 bytes ("Ġthe"),
    # a character's rest
    assert msg["content"] is not None and "</think>" not in msg["content"]


def test_stream_reasoning_then_content(srv):
    body = dict(response_format=RF, max_tokens=60, max_reasoning_tokens=6, seed=11, temperature=1)
    whole = chat(srv, **body)["choices"][0]["message"]
    kinds, reasoning, content = [], "", ""
    with httpx.stream("POST", srv.url + "/v1/chat/completions", json=dict(body, messages=ASK, stream=True),
                      headers=srv.headers(), timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"][0]["delta"]
            if delta.get("reasoning_content"):
                kinds.append("r")
                reasoning += delta["reasoning_content"]
            if delta.get("content"):
                kinds.append("c")
                content += delta["content"]
    assert "r" in kinds and "c" in kinds
    assert kinds == sorted(kinds, key=lambda k: k == "c"), kinds  # every reasoning delta first
    assert (reasoning, content) == (whole["reasoning_content"], whole["content"])


def test_openai_client_reads_reasoning_content(srv):
    c = srv.client()
    r = c.chat.completions.create(model=NAME, messages=ASK, max_tokens=60, seed=2, response_format=RF,
                                  extra_body={"max_reasoning_tokens": 4})
    msg = r.choices[0].message
    assert isinstance(msg.reasoning_content, str)
    jsonschema.validate(json.loads(msg.content), SCHEMA)
    assert forced_after(r.usage.completion_tokens_details.reasoning_tokens, 4)


def test_n_choices_and_logprobs(srv):
    j = chat(srv, response_format=RF, max_tokens=60, max_reasoning_tokens=3, seed=7, temperature=1, n=2,
             logprobs=True)
    for ch in j["choices"]:
        jsonschema.validate(json.loads(ch["message"]["content"]), SCHEMA)
    # one logprob per output token, the forced tag's included
    assert sum(len(ch["logprobs"]["content"]) for ch in j["choices"]) == j["usage"]["completion_tokens"]
    assert forced_after(j["usage"]["completion_tokens_details"]["reasoning_tokens"] / 2, 3)


def test_tool_calls_read_from_the_answer(srv):
    tools = [{"type": "function", "function": {"name": "get", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 3}}, "required": ["city"]}}}]
    j = chat(srv, tools=tools, tool_choice="required", max_tokens=80, max_reasoning_tokens=5, seed=4)
    msg = j["choices"][0]["message"]
    assert isinstance(msg["reasoning_content"], str)
    calls = msg["tool_calls"]
    assert calls and all(c["function"]["name"] == "get" for c in calls)
    for c in calls:
        assert "city" in json.loads(c["function"]["arguments"])
    assert j["choices"][0]["finish_reason"] == "tool_calls"


def test_enable_thinking_false_has_no_reasoning(srv):
    j = chat(srv, response_format=RF, max_tokens=40, seed=1, chat_template_kwargs={"enable_thinking": False})
    msg = j["choices"][0]["message"]
    assert "reasoning_content" not in msg
    jsonschema.validate(json.loads(msg["content"]), SCHEMA)


@pytest.mark.parametrize("value", [-1, "5", 1.5, 10 ** 9])
def test_bad_max_reasoning_tokens(srv, value):
    with pytest.raises(openai.BadRequestError) as ei:
        srv.client().chat.completions.create(model=NAME, messages=ASK, max_tokens=20,
                                             extra_body={"max_reasoning_tokens": value})
    assert ei.value.status_code == 400
    assert ei.value.body["type"] == "invalid_request_error"
    assert ei.value.body["param"] == "max_reasoning_tokens"


def test_no_room_for_tag_and_answer(srv):
    # the schema's shortest answer ({"a": 0, "b": ""}) and the tag do not fit in 12 tokens
    with pytest.raises(openai.BadRequestError) as ei:
        srv.client().chat.completions.create(model=NAME, messages=ASK, max_tokens=12, response_format=RF)
    assert ei.value.body["param"] == "max_tokens"
    assert chat(srv, max_tokens=2)["choices"][0]["finish_reason"] == "length"  # still serving


def test_without_parser_the_field_is_refused(model):
    s = Server("--max-num-seqs", "2", model=model)
    try:
        r = s.post("/v1/chat/completions", {"messages": ASK, "max_tokens": 5, "max_reasoning_tokens": 3})
        assert r.status_code == 400 and r.json()["error"]["param"] == "max_reasoning_tokens"
        j = s.post("/v1/chat/completions", {"messages": ASK, "max_tokens": 5, "seed": 1}).json()
        assert "reasoning_content" not in j["choices"][0]["message"]
        assert "completion_tokens_details" not in j["usage"]
    finally:
        s.stop()


def test_serve_flags(model):
    import subprocess

    from live import sieve_bin
    h = subprocess.run([sieve_bin(), "serve", "--help"], capture_output=True, timeout=60)
    assert b"--reasoning-parser" in h.stdout and b"--max-reasoning-tokens" in h.stdout
    for args, msg in [(("--reasoning-parser", "qwen2"), b"qwen3 or deepseek_r1"),
                      (("--max-reasoning-tokens", "-3"), b"--max-reasoning-tokens")]:
        r = subprocess.run([sieve_bin(), "serve", "-m", str(model), *args], capture_output=True, timeout=60)
        assert r.returncode == 64 and msg in r.stderr, r.stderr


# "</think>" as one token, as Qwen3's tokenizer has it (a user-defined, non-special added token):
# the forced end is that one token (the engine's single-token end path), and a model that writes
# it itself ends its reasoning there.
@pytest.fixture(scope="module")
def srv_one_token_tag(tmp_path_factory):
    path = tmp_path_factory.mktemp("think1") / "think1.gguf"
    cfg = tiny.make_config("qwen3", extra_tokens=("<think>", "</think>"))
    cfg["context"] = 1024
    tiny.write_gguf(path, cfg, tiny.make_weights(cfg), chat_template=tiny.QWEN3_THINK_TEMPLATE)
    s = Server("--reasoning-parser", "qwen3", "--max-num-seqs", "4", model=path)
    yield s
    s.stop()


@pytest.mark.parametrize("seed", range(6))
def test_one_token_end_tag(srv_one_token_tag, seed):
    j = chat(srv_one_token_tag, response_format=RF, max_tokens=120, max_reasoning_tokens=12, seed=seed,
             temperature=1.5, logprobs=True)
    msg = j["choices"][0]["message"]
    jsonschema.validate(json.loads(msg["content"]), SCHEMA)
    for part in (msg["content"], msg["reasoning_content"]):
        assert "</think>" not in part and not part.startswith("<think>"), msg
    rt = j["usage"]["completion_tokens_details"]["reasoning_tokens"]
    # the tag is one token: ended by the model (at most the budget, the tag included) or forced
    # after the budget (plus at most 3 tokens finishing a UTF-8 character)
    assert 1 <= rt <= 12 + 1 + 3, rt
    toks = [t["token"] for t in j["choices"][0]["logprobs"]["content"]]
    assert toks.count("</think>") == 1 and toks.index("</think>") == rt - 1, toks[:rt + 1]


def test_one_token_end_tag_budget_zero(srv_one_token_tag):
    j = chat(srv_one_token_tag, response_format=RF, max_tokens=60, max_reasoning_tokens=0, seed=3)
    assert j["choices"][0]["message"]["reasoning_content"] == ""
    assert j["usage"]["completion_tokens_details"]["reasoning_tokens"] == 1
    jsonschema.validate(json.loads(j["choices"][0]["message"]["content"]), SCHEMA)


def test_one_token_end_tag_written_by_the_model(srv_one_token_tag):
    # logit_bias makes the model write the tag itself (id 262: the 256 bytes, 3 merges, BOS, EOS,
    # then "<think>" and "</think>"): the reasoning ends there, before any budget.
    j = chat(srv_one_token_tag, response_format=RF, max_tokens=120, max_reasoning_tokens=40, seed=1,
             temperature=1, logit_bias={"262": 6}, logprobs=True)
    msg = j["choices"][0]["message"]
    jsonschema.validate(json.loads(msg["content"]), SCHEMA)
    rt = j["usage"]["completion_tokens_details"]["reasoning_tokens"]
    assert 1 <= rt < 40, rt
    toks = [t["token"] for t in j["choices"][0]["logprobs"]["content"]]
    assert toks[rt - 1] == "</think>" and "</think>" not in msg["reasoning_content"], (toks, msg)
