"""The real `openai` client against a live `sieve serve` on the default model.

Every constrained output is checked by an independent judge: Python's
jsonschema for schemas (and pydantic for parse()), re.fullmatch for regexes.
Greedy requests (temperature 0) are deterministic on the CPU backend, which
lets a streamed response be compared with the same request unstreamed.
"""
import json
import re
import time

import httpx2 as httpx
import jsonschema
import lark
import openai
import pydantic
import pytest

from live import NAME, Server


def ask(text):
    return [{"role": "user", "content": text}]


def test_chat(client):
    r = client.chat.completions.create(model=NAME, messages=ask("Say hello."), max_tokens=12, temperature=0)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == NAME
    (c,) = r.choices
    assert c.index == 0 and c.message.role == "assistant" and c.message.content
    assert c.finish_reason in ("stop", "length")
    u = r.usage
    assert u.prompt_tokens > 5 and 0 < u.completion_tokens <= 12
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert 0 <= u.prompt_tokens_details.cached_tokens <= u.prompt_tokens
    if c.finish_reason == "length":
        assert u.completion_tokens == 12


def test_developer_and_text_parts(client):
    r = client.chat.completions.create(
        model=NAME, max_tokens=5, temperature=0,
        messages=[{"role": "developer", "content": "Answer briefly."},
                  {"role": "user", "content": [{"type": "text", "text": "Name a colour."}]}])
    assert r.choices[0].message.content


def test_completion(client):
    r = client.completions.create(model=NAME, prompt="The capital of France is", max_tokens=8, temperature=0)
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    (c,) = r.choices
    assert isinstance(c.text, str) and c.text and c.finish_reason in ("stop", "length")
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_prefix_cache_is_reported(client):
    msgs = ask("Tell me about the history of the printing press in Europe, in detail, please. " * 3)
    client.chat.completions.create(model=NAME, messages=msgs, max_tokens=1, temperature=0)
    r = client.chat.completions.create(model=NAME, messages=msgs, max_tokens=1, temperature=0)
    # The second time the full blocks of the prompt come from the prefix cache.
    assert r.usage.prompt_tokens_details.cached_tokens >= 16


def test_stream_matches_and_has_usage(client):
    kw = dict(model=NAME, messages=ask("Count from one to five."), max_tokens=16, temperature=0)
    whole = client.chat.completions.create(**kw)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert all(ch.object == "chat.completion.chunk" and ch.id == chunks[0].id for ch in chunks)
    body, usage = chunks[:-1], chunks[-1]
    assert usage.choices == [] and usage.usage is not None
    assert all(ch.usage is None for ch in body)
    assert body[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in body)
    assert text == whole.choices[0].message.content
    finishes = [ch.choices[0].finish_reason for ch in body if ch.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    assert usage.usage.completion_tokens == whole.usage.completion_tokens
    assert usage.usage.prompt_tokens == whole.usage.prompt_tokens


def test_stream_raw_sse_ends_with_done(server):
    with httpx.stream("POST", server.url + "/v1/completions", headers=server.headers(), timeout=120,
                      json={"model": NAME, "prompt": "Hello", "max_tokens": 4, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line]
    assert events[-1] == "data: [DONE]"
    for e in events[:-1]:
        assert e.startswith("data: ")
        j = json.loads(e[6:])
        assert j["object"] == "text_completion" and "usage" not in j  # include_usage not asked


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=20)
    age: int
    languages: list[str] = pydantic.Field(max_length=3)


def test_parse_pydantic(client):
    r = client.chat.completions.parse(model=NAME, messages=ask("Describe a software engineer as JSON."),
                                      response_format=Person, max_tokens=120, temperature=0.7, seed=3)
    m = r.choices[0].message
    assert isinstance(m.parsed, Person)
    jsonschema.validate(json.loads(m.content), Person.model_json_schema())
    assert r.choices[0].finish_reason == "stop"


def test_json_object(client):
    r = client.chat.completions.create(model=NAME, messages=ask("Give me a JSON object about a cat."),
                                       response_format={"type": "json_object"}, max_tokens=40, temperature=0.8,
                                       seed=11)
    assert isinstance(json.loads(r.choices[0].message.content), dict)


SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 15},
        "population": {"type": "integer", "minimum": 0},
        "coastal": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["old", "new", "big", "small"]}, "maxItems": 3},
    },
    "required": ["city", "population", "coastal", "tags"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("strict", [True, False])
def test_json_schema(client, strict):
    r = client.chat.completions.create(
        model=NAME, messages=ask("Describe a city."), max_tokens=100, temperature=1.0, seed=7,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA, "strict": strict}})
    jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)


@pytest.mark.parametrize("extra", [
    {"guided_json": SCHEMA},
    {"structured_outputs": {"json": SCHEMA}},
])
def test_json_extras(client, extra):
    r = client.chat.completions.create(model=NAME, messages=ask("Describe a city."), max_tokens=100,
                                       temperature=1.0, seed=5, extra_body=extra)
    jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)


PHONE = r"\(\d{3}\) \d{3}-\d{4}"


@pytest.mark.parametrize("field", ["regex", "guided_regex"])
def test_regex_extra(client, field):
    r = client.chat.completions.create(model=NAME, messages=ask("What is your phone number?"), max_tokens=30,
                                       temperature=1.0, seed=1, extra_body={field: PHONE})
    assert re.fullmatch(PHONE, r.choices[0].message.content), r.choices[0].message.content


def test_regex_on_completions(client):
    r = client.completions.create(model=NAME, prompt="Today's date is", max_tokens=20, temperature=1.0, seed=2,
                                  extra_body={"regex": r" \d{4}-\d{2}-\d{2}"})
    assert re.fullmatch(r" \d{4}-\d{2}-\d{2}", r.choices[0].text)


# A recursive GBNF grammar (nested lists: a part that calls itself,
# fsm/grammar.c), and the same language for lark, an independent parser.
LIST_GBNF = r"""
root ::= list
list ::= "[" ( item ( ", " item )* )? "]"
item ::= [a-z]+ | list
"""
LIST_LARK = r"""
start: list
list: "[" (item (", " item)*)? "]"
item: WORD | list
WORD: /[a-z]+/
"""


@pytest.mark.parametrize("extra", [{"grammar": LIST_GBNF}, {"guided_grammar": LIST_GBNF}, {"ebnf": LIST_GBNF},
                                   {"structured_outputs": {"grammar": LIST_GBNF}},
                                   {"structured_outputs": {"grammar": LIST_LARK}}, {"guided_grammar": LIST_LARK}])
def test_grammar(client, extra):
    parser = lark.Lark(LIST_LARK, parser="earley", lexer="dynamic")
    r = client.chat.completions.create(model=NAME, messages=ask("Write a nested list."), max_tokens=60,
                                       temperature=1.0, seed=3, extra_body=extra)
    parser.parse(r.choices[0].message.content)  # raises when the output is not in the language


@pytest.mark.parametrize("grammar, kind, where", [
    ('root ::= "a" (', "invalid_request_error", "line 1, column 14"),
    ("root ::= expr\nexpr ::= expr \"+\" [0-9] | [0-9]\n", "invalid_request_error", "left-recursive"),
    ('root ::= item\n', "invalid_request_error", "not defined"),
    ('start: "a"\n%import other.X\n', "invalid_request_error", "line 2, column 9"),
])
def test_grammar_errors(client, grammar, kind, where):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=NAME, messages=ask("Hi."), max_tokens=5, extra_body={"grammar": grammar})
    body = e.value.body
    assert body["type"] == kind and body["param"] == "grammar" and where in body["message"], body


@pytest.mark.parametrize("extra", [{"choice": ["red", "green", "blue"]}, {"guided_choice": ["red", "green", "blue"]},
                                   {"structured_outputs": {"choice": ["red", "green", "blue"]}}])
def test_choice(client, extra):
    r = client.chat.completions.create(model=NAME, messages=ask("Pick a colour."), max_tokens=5, temperature=1.0,
                                       extra_body=extra)
    assert r.choices[0].message.content in ("red", "green", "blue")


def test_stream_constrained(client):
    chunks = list(client.chat.completions.create(
        model=NAME, messages=ask("Describe a city."), max_tokens=100, temperature=1.0, seed=9, stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA}}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    jsonschema.validate(json.loads(text), SCHEMA)


def test_n_choices(client):
    r = client.chat.completions.create(model=NAME, messages=ask("Write a word."), max_tokens=8, temperature=1.0,
                                       n=3, seed=4)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert r.usage.completion_tokens >= 3
    r2 = client.chat.completions.create(model=NAME, messages=ask("Write a word."), max_tokens=8, temperature=1.0,
                                        n=3, seed=4)
    assert [c.message.content for c in r.choices] == [c.message.content for c in r2.choices]  # seeded


def test_n_choices_constrained_stream(client):
    chunks = list(client.chat.completions.create(
        model=NAME, messages=ask("Describe a city."), max_tokens=100, temperature=1.0, n=2, seed=8, stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA}}))
    texts = {0: "", 1: ""}
    for ch in chunks:
        for c in ch.choices:
            texts[c.index] += c.delta.content or ""
    for t in texts.values():
        jsonschema.validate(json.loads(t), SCHEMA)


def test_stop_string(client):
    kw = dict(model=NAME, prompt="1, 2, 3, 4, 5, 6, 7, 8,", max_tokens=30, temperature=0)
    free = client.completions.create(**kw).choices[0].text
    assert " 10," in free, free
    r = client.completions.create(stop=[" 10,"], **kw)
    assert r.choices[0].text == free[:free.index(" 10,")] and r.choices[0].finish_reason == "stop"


def test_seed_reproducible(client):
    kw = dict(model=NAME, messages=ask("Write a short poem."), max_tokens=20, temperature=1.0, seed=1234)
    a = client.chat.completions.create(**kw).choices[0].message.content
    b = client.chat.completions.create(**kw).choices[0].message.content
    assert a == b


def test_logit_bias(client):
    # +100 on one token makes greedy decoding repeat it; another id, another token.
    toks = {}
    for tid in (1234, 2345):
        r = client.completions.create(model=NAME, prompt="Hello", max_tokens=4, temperature=0, logprobs=0,
                                      logit_bias={str(tid): 100})
        t = r.choices[0].logprobs.tokens
        assert len(t) == 4 and len(set(t)) == 1, t
        toks[tid] = t[0]
    assert toks[1234] != toks[2345]


def test_prompt_as_token_ids(client):
    r = client.completions.create(model=NAME, prompt=[1, 2, 3], max_tokens=1, temperature=0)
    assert r.usage.prompt_tokens == 3


def test_chat_logprobs(client):
    r = client.chat.completions.create(model=NAME, messages=ask("Say yes."), max_tokens=6, temperature=0,
                                       logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for e in content:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token or "\ufffd" in e.token
        # greedy: the chosen token is the most likely one
        assert e.logprob == pytest.approx(e.top_logprobs[0].logprob, abs=1e-5)
        lps = [t.logprob for t in e.top_logprobs]
        assert lps == sorted(lps, reverse=True)
    text = "".join(e.token for e in content)
    assert text.endswith(r.choices[0].message.content) or r.choices[0].message.content in text


def test_constrained_logprobs_cover_forced_tokens(client):
    r = client.chat.completions.create(model=NAME, messages=ask("Describe a city."), max_tokens=100, temperature=0,
                                       logprobs=True, response_format={"type": "json_schema", "json_schema": {
                                           "name": "city", "schema": SCHEMA}})
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    assert b"".join(bytes(e.bytes) for e in content).decode() == r.choices[0].message.content


def test_completion_logprobs(client):
    r = client.completions.create(model=NAME, prompt="One, two,", max_tokens=5, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 5
    assert lp.text_offset[0] == 0 and all(a <= b for a, b in zip(lp.text_offset, lp.text_offset[1:]))
    assert all(len(t) <= 2 for t in lp.top_logprobs)


def test_models_health_metrics(server):
    m = httpx.get(server.url + "/v1/models", headers=server.headers()).json()
    assert m["object"] == "list" and m["data"][0]["id"] == NAME and m["data"][0]["object"] == "model"
    h = httpx.get(server.url + "/health")
    assert h.status_code == 200
    text = httpx.get(server.url + "/metrics").text
    for name in ["num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "prompt_tokens_total",
                 "generation_tokens_total", "prefix_cache_queries_total", "prefix_cache_hits_total",
                 "num_preemptions_total", "batch_steps_interrupted_total", "request_success_total",
                 "time_to_first_token_seconds",
                 "inter_token_latency_seconds", "e2e_request_latency_seconds", "constraint_compile_seconds",
                 "constraint_cache_hits_total", "jump_forward_tokens_total"]:
        assert f"# TYPE sieve:{name} " in text, name
    for h in ["time_to_first_token_seconds", "e2e_request_latency_seconds"]:
        assert f'sieve:{h}_bucket{{model_name="{NAME}",le="+Inf"}}' in text


def test_cache_config_info(server):
    """The KV cache's shape as an info gauge, as vLLM's cache_config_info: the endpoint picker of
    the Gateway API Inference Extension reads the block count from it."""
    m = server.metrics()
    info = [k for k in m if k.startswith("sieve:cache_config_info{")]
    assert len(info) == 1 and m[info[0]] == 1, info
    assert 'block_size="16"' in info[0] and re.search(r'num_blocks="[1-9][0-9]*"', info[0]), info[0]


def test_metrics_compat_vllm(server):
    """--metrics-compat vllm: the series that routers and autoscalers built for vLLM scrape (the
    endpoint picker, the production-stack router, KEDA and KServe), under their vllm: names, with
    the values of sieve's own series; without the flag there are none."""
    s = Server("--metrics-compat", "vllm")
    try:
        c = s.client()
        r = c.chat.completions.create(model=NAME, messages=ask("Hi"), max_tokens=4, temperature=0)
        m = s.wait_idle()
        lab = f'{{model_name="{NAME}"}}'
        same = {"num_requests_running": "num_requests_running", "num_requests_waiting": "num_requests_waiting",
                "kv_cache_usage_perc": "kv_cache_usage_perc", "gpu_cache_usage_perc": "kv_cache_usage_perc",
                "prefix_cache_queries_total": "prefix_cache_queries_total",
                "prefix_cache_hits_total": "prefix_cache_hits_total", "prompt_tokens_total": "prompt_tokens_total",
                "generation_tokens_total": "generation_tokens_total",
                "time_to_first_token_seconds_count": "time_to_first_token_seconds_count",
                "e2e_request_latency_seconds_count": "e2e_request_latency_seconds_count",
                "time_per_output_token_seconds_count": "inter_token_latency_seconds_count",
                "inter_token_latency_seconds_count": "inter_token_latency_seconds_count"}
        for v, own in same.items():
            assert m[f"vllm:{v}{lab}"] == m[f"sieve:{own}{lab}"], v
        assert m[f"vllm:generation_tokens_total{lab}"] >= r.usage.completion_tokens > 0
        assert m[f"vllm:e2e_request_latency_seconds_count{lab}"] == 1
        for h in ["time_to_first_token_seconds", "e2e_request_latency_seconds", "time_per_output_token_seconds"]:
            assert f'vllm:{h}_bucket{{model_name="{NAME}",le="+Inf"}}' in m, h
        info = [k for k in m if k.startswith("vllm:cache_config_info{")]
        assert len(info) == 1 and 'block_size="16"' in info[0] and "num_gpu_blocks=" in info[0], info
        text = httpx.get(s.url + "/metrics").text
        assert "# TYPE vllm:num_requests_waiting gauge" in text and "# TYPE vllm:prefix_cache_hits_total counter" in text
    finally:
        s.stop()
    assert not [k for k in server.metrics() if k.startswith("vllm:")]


def test_metrics_count(server, client):
    before = server.metrics()
    r = client.chat.completions.create(model=NAME, messages=ask("Hi"), max_tokens=3, temperature=0)
    after = server.metrics()
    lab = f'{{model_name="{NAME}"}}'
    assert after[f"sieve:generation_tokens_total{lab}"] - before[f"sieve:generation_tokens_total{lab}"] == \
        r.usage.completion_tokens
    assert after[f"sieve:prompt_tokens_total{lab}"] - before[f"sieve:prompt_tokens_total{lab}"] == \
        r.usage.prompt_tokens
    assert after[f"sieve:e2e_request_latency_seconds_count{lab}"] == \
        before[f"sieve:e2e_request_latency_seconds_count{lab}"] + 1


def test_constraint_cache_hits(server, client):
    schema = {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]}
    rf = {"type": "json_schema", "json_schema": {"name": "k", "schema": schema}}
    client.chat.completions.create(model=NAME, messages=ask("k?"), max_tokens=10, response_format=rf)
    before = server.metric("constraint_cache_hits_total")
    client.chat.completions.create(model=NAME, messages=ask("k?"), max_tokens=10, response_format=rf)
    assert server.metric("constraint_cache_hits_total") == before + 1


def test_jump_forward_counted(server, client):
    before = server.metric("jump_forward_tokens_total")
    r = client.chat.completions.create(model=NAME, messages=ask("Describe a city."), max_tokens=100,
                                       temperature=0, response_format={"type": "json_schema", "json_schema": {
                                           "name": "city", "schema": SCHEMA}})
    jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)
    # '{"city": "' is forced by the schema: at least a few tokens were jump-forward
    assert server.metric("jump_forward_tokens_total") > before


def test_empty_answer(client):
    """The first token ends the answer (<|im_end|>, id 2, pushed by logit_bias): empty content, not a
    missing choice."""
    kw = dict(model=NAME, messages=ask("Hi"), max_tokens=5, temperature=0, logit_bias={"2": 100})
    r = client.chat.completions.create(**kw)
    (c,) = r.choices
    assert c.message.content == "" and c.finish_reason == "stop" and r.usage.completion_tokens <= 1
    chunks = list(client.chat.completions.create(stream=True, **kw))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == ""
    assert chunks[-1].choices[0].finish_reason == "stop"
    r = client.completions.create(model=NAME, prompt="Hi", max_tokens=5, temperature=0, logit_bias={"2": 100})
    assert r.choices[0].text == "" and r.choices[0].finish_reason == "stop"


def test_budget_stop_reason(server, client):
    """A constrained answer that the budget rule closes at max_tokens is complete and valid, with
    finish_reason "stop" and "stop_reason": "max_tokens", whole and streamed, so a client can tell
    it from a natural stop; a natural stop has no stop_reason."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tokenizer"))
    import gguf_io
    from live import MODEL
    tokens = gguf_io.read(str(MODEL))[0]["tokenizer.ggml.tokens"]
    no_quote = {str(i): -100 for i, t in enumerate(tokens) if '"' in t}  # never closes the string itself
    schema = {"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"]}
    rf = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    kw = dict(model=NAME, messages=ask("Tell me a very long story about a dragon, as JSON."), max_tokens=24,
              temperature=0, response_format=rf, logit_bias=no_quote)
    r = httpx.post(server.url + "/v1/chat/completions", json=kw, headers=server.headers(), timeout=300).json()
    ch = r["choices"][0]
    jsonschema.validate(json.loads(ch["message"]["content"]), schema)
    assert r["usage"]["completion_tokens"] == 24, r["usage"]
    assert ch["finish_reason"] == "stop" and ch["stop_reason"] == "max_tokens", ch
    last = None
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=dict(kw, stream=True),
                      headers=server.headers(), timeout=300) as s:
        for line in s.iter_lines():
            if line.startswith("data: {"):
                c = json.loads(line[6:])["choices"]
                if c and c[0].get("finish_reason"):
                    last = c[0]
    assert last["finish_reason"] == "stop" and last["stop_reason"] == "max_tokens", last
    # a natural stop
    kw2 = dict(kw, messages=ask("A story as JSON."), max_tokens=200, logit_bias={},
               response_format={"type": "json_schema", "json_schema": {"name": "k", "schema": {
                   "type": "object", "properties": {"k": {"type": "boolean"}}, "required": ["k"]}}})
    r = httpx.post(server.url + "/v1/chat/completions", json=kw2, headers=server.headers(), timeout=300).json()
    assert r["choices"][0]["finish_reason"] == "stop" and "stop_reason" not in r["choices"][0], r
