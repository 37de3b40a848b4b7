"""Errors, limits, disconnects, load and shutdown against a live server.

Every error is checked for its status, OpenAI's error shape (type, param)
and that the server keeps serving after it. Disconnecting clients must leave
no running request and no KV block in use (through /metrics)."""
import json
import signal
import socket
import threading
import time
from pathlib import Path

import httpx2 as httpx
import jsonschema
import openai
import pytest

from live import NAME, Server


def ask(text):
    return [{"role": "user", "content": text}]


def still_serving(client):
    r = client.chat.completions.create(model=NAME, messages=ask("Hi"), max_tokens=2, temperature=0)
    assert r.choices[0].message.content is not None


def check_error(exc, status, param=None, type_="invalid_request_error"):
    assert exc.status_code == status
    body = exc.body  # the parsed "error" object
    assert body["type"] == type_, body
    assert body["param"] == param, body
    assert body["message"]
    return body


@pytest.mark.parametrize("kw,param", [
    (dict(temperature=5), "temperature"),
    (dict(top_p=-1), "top_p"),
    (dict(n=100), "n"),
    (dict(max_tokens=100000), "max_tokens"),
    (dict(logit_bias={"99999999": 1}), "logit_bias"),
    (dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=x)y"}}}}}), "response_format"),
    (dict(extra_body={"regex": "(unclosed"}), "regex"),
    (dict(tool_choice="required"), "tool_choice"),
])
def test_400(client, kw, param):
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model=NAME, messages=ask("x"), **kw)
    check_error(ei.value, 400, param)
    still_serving(client)


def test_400_schema_pointer(client):
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "no-such-format"}}}
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model=NAME, messages=ask("x"), max_tokens=5, response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
    body = check_error(ei.value, 400, "response_format")
    assert "/properties/when" in body["message"] and body["code"] == "invalid_constraint"


def test_400_before_stream_headers(server):
    """A bad schema on a streaming request is a plain 400, not a broken stream."""
    body = {"model": NAME, "messages": ask("x"), "stream": True, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "(?<=a)b"}}}}
    r = server.post("/v1/chat/completions", body)
    assert r.status_code == 400 and r.headers["content-type"] == "application/json"
    assert r.json()["error"]["param"] == "response_format"


def test_400_constraint_longer_than_max_tokens(server):
    """The engine's admission check: the schema needs more tokens than max_tokens allows."""
    schema = {"type": "object", "properties": {"a_long_property_name": {"type": "string", "minLength": 20}},
              "required": ["a_long_property_name"]}
    r = server.post("/v1/chat/completions", {"model": NAME, "messages": ask("x"), "max_tokens": 3, "stream": True,
                                             "response_format": {"type": "json_schema", "json_schema": {
                                                 "name": "x", "schema": schema}}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens", r.text


def test_400_context(client):
    with pytest.raises(openai.BadRequestError) as ei:
        client.completions.create(model=NAME, prompt="word " * 5000, max_tokens=5)
    assert check_error(ei.value, 400, "prompt")["code"] == "context_length_exceeded"


def test_400_not_json(server):
    r = httpx.post(server.url + "/v1/chat/completions", content=b"{nope", headers=server.headers())
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_401(server, client):
    bad = server.client(api_key="wrong")
    with pytest.raises(openai.AuthenticationError) as ei:
        bad.chat.completions.create(model=NAME, messages=ask("x"), max_tokens=2)
    assert check_error(ei.value, 401, None, "authentication_error")["code"] == "invalid_api_key"
    r = httpx.get(server.url + "/v1/models")
    assert r.status_code == 401
    still_serving(client)


def test_404(server, client):
    with pytest.raises(openai.NotFoundError) as ei:
        client.chat.completions.create(model="gpt-4o", messages=ask("x"), max_tokens=2)
    assert check_error(ei.value, 404, "model", "not_found_error")["code"] == "model_not_found"
    r = httpx.post(server.url + "/v1/nothing", json={}, headers=server.headers())
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    still_serving(client)


def test_413(server, client):
    r = server.post("/v1/chat/completions", {"model": NAME, "messages": ask("x" * 70000)})
    assert r.status_code == 413
    e = r.json()["error"]
    assert e["type"] == "invalid_request_error" and e["code"] == "request_too_large"
    still_serving(client)


def test_cancel_on_disconnect(server):
    """Streaming and non-streaming clients that go away: nothing keeps running. The end-of-text
    tokens are biased away (<|endoftext|> 0, <|im_end|> 2), so that neither request can finish on
    its own before its client leaves (at ~150 tokens/s, sampling one within the second was
    possible)."""
    base = server.metric("request_success_total", finished_reason="abort")
    no_end = {"0": -100, "2": -100}
    # streaming: read a few chunks, then close
    with httpx.stream("POST", server.url + "/v1/completions", headers=server.headers(), timeout=60,
                      json={"model": NAME, "prompt": "Once upon a time", "max_tokens": 3000, "stream": True,
                            "temperature": 1.0, "stop": [], "logit_bias": no_end}) as r:
        n = 0
        for line in r.iter_lines():
            n += bool(line)
            if n >= 3:
                break
    # non-streaming: a raw socket that sends the request and closes
    body = json.dumps({"model": NAME, "prompt": "Once upon a time", "max_tokens": 3000, "temperature": 1.0,
                       "logit_bias": no_end}).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Authorization: Bearer " + server.api_key.encode() + b"\r\nContent-Length: " +
              str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(1.0)
    s.close()
    m = server.wait_idle(timeout=30)
    lab = f'{{model_name="{NAME}"}}'
    assert m[f"sieve:num_requests_running{lab}"] == 0
    assert m[f"sieve:kv_cache_usage_perc{lab}"] == 0
    assert server.metric("request_success_total", finished_reason="abort") >= base + 2


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 1000},
                                           "word": {"type": "string", "maxLength": 12}},
          "required": ["n", "word"], "additionalProperties": False}


def test_64_concurrent_streams(server):
    """64 streaming clients at once (half constrained); a few hang up mid-stream."""
    results, errors = {}, []

    def one(i):
        try:
            c = server.client()
            kw = dict(model=NAME, messages=ask(f"Item {i}: give a number and a word."), max_tokens=24,
                      temperature=1.0, seed=i, stream=True, stream_options={"include_usage": True})
            if i % 2 == 0:
                kw["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}
            stream = c.chat.completions.create(**kw)
            text, usage = "", None
            for k, ch in enumerate(stream):
                if i % 16 == 15 and k == 3:
                    stream.close()  # hang up mid-stream
                    results[i] = None
                    return
                if ch.choices:
                    text += ch.choices[0].delta.content or ""
                if ch.usage:
                    usage = ch.usage
            results[i] = (text, usage)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors[:5]
    assert len(results) == 64
    for i, res in results.items():
        if i % 16 == 15:
            continue
        text, usage = res
        assert usage is not None and usage.completion_tokens > 0
        if i % 2 == 0:
            jsonschema.validate(json.loads(text), SCHEMA)
    m = server.wait_idle(timeout=60)
    lab = f'{{model_name="{NAME}"}}'
    assert m[f"sieve:num_requests_running{lab}"] == 0 and m[f"sieve:kv_cache_usage_perc{lab}"] == 0


@pytest.fixture(scope="module")
def small():
    """A server with one running slot, a queue of one and a 1.5 s deadline."""
    s = Server("--max-num-seqs", "1", "--max-queue", "1", "--request-timeout", "1.5")
    yield s
    s.stop()


def test_429_when_queue_full(small):
    out = []

    def one():
        r = small.post("/v1/completions", {"model": NAME, "prompt": "Once", "max_tokens": 40, "temperature": 1.0})
        out.append(r)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    codes = sorted(r.status_code for r in out)
    assert 200 in codes and 429 in codes, codes
    for r in out:
        if r.status_code == 429:
            assert r.headers.get("retry-after") and r.json()["error"]["type"] == "rate_limit_error"
    small.wait_idle()
    assert small.post("/v1/completions", {"model": NAME, "prompt": "x", "max_tokens": 2}).status_code == 200


def test_deadline(small):
    t = time.time()
    # the special tokens (<|endoftext|>, <|im_start|>, <|im_end|>) banned: the
    # text cannot end by itself before the deadline (sampling is random)
    r = small.post("/v1/completions", {"model": NAME, "prompt": "Once upon a time", "max_tokens": 3000,
                                       "temperature": 1.0, "logit_bias": {"0": -100, "1": -100, "2": -100}})
    assert r.status_code == 200
    assert time.time() - t < 10
    c = r.json()["choices"][0]
    assert c["finish_reason"] == "length" and r.json()["usage"]["completion_tokens"] < 3000
    small.wait_idle()


def test_sigterm_drains():
    s = Server("--drain-timeout", "60")
    try:
        got = {}

        def stream():
            with httpx.stream("POST", s.url + "/v1/completions", headers=s.headers(), timeout=120,
                              # long enough to be running at the signal on any machine: the
                              # special tokens banned, so that it cannot end by itself
                              json={"model": NAME, "prompt": "Once upon a time", "max_tokens": 1000,
                                    "stream": True, "temperature": 1.0, "stop": [],
                                    "logit_bias": {"0": -100, "1": -100, "2": -100}}) as r:
                got["lines"] = [line for line in r.iter_lines() if line]

        with httpx.Client(headers=s.headers(), timeout=30) as keep:
            assert keep.get(s.url + "/health").status_code == 200  # a kept-alive connection
            t = threading.Thread(target=stream)
            t.start()
            time.sleep(0.5)
            s.proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            # on the open connection: no new work, health says so
            assert keep.get(s.url + "/health").status_code == 503
            r = keep.post(s.url + "/v1/completions", json={"model": NAME, "prompt": "x", "max_tokens": 2})
            assert r.status_code == 503 and r.headers.get("retry-after")
            t.join(120)
        assert got["lines"][-1] == "data: [DONE]"
        final = json.loads(got["lines"][-2][6:])
        assert final["choices"][0]["finish_reason"] in ("stop", "length")  # finished, not aborted
        assert s.proc.wait(60) == 0
    finally:
        s.stop(signal.SIGKILL)


def test_engine_failure_is_503(tmp_path):
    """A model whose logits hold a NaN makes the first sampling step fail: the
    engine thread stops; the request, /health and later requests say 503."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
    import make_tiny_llama as tiny

    cfg = tiny.make_config()
    w = tiny.make_weights(cfg)
    w["lm_head.weight"][5, :] = float("nan")
    path = tmp_path / "nan.gguf"
    tiny.write_gguf(path, cfg, w)
    s = Server(model=path)
    try:
        r = s.post("/v1/completions", {"prompt": "the cat", "max_tokens": 5})
        assert r.status_code == 503 and r.json()["error"]["type"] == "service_unavailable_error", r.text
        assert httpx.get(s.url + "/health").status_code == 503
        assert s.metric("engine_alive") == 0
        r = s.post("/v1/completions", {"prompt": "the", "max_tokens": 2, "stream": True})
        assert r.status_code == 503
    finally:
        s.stop()


def _raw_post(server, body):
    """A request on a raw socket, left open: closing it is the client going away."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Authorization: Bearer " + server.api_key.encode() + b"\r\nContent-Length: " +
              str(len(data)).encode() + b"\r\n\r\n" + data)
    return s


def _until(pred, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


def test_compiler_caches_stay_within_their_bounds():
    """The compiled-constraint cache and the compiler's memo of sub-automata
    are bounded by --constraint-cache-mb and --dfa-memo-mb, which /metrics
    shows; a memo of 0 keeps nothing."""
    for memo_mb in (1, 0):
        s = Server("--constraint-cache-mb", "1", "--dfa-memo-mb", str(memo_mb))
        try:
            for i in range(12):
                schema = {"type": "object", "properties": {f"k{i}_{j}": {"type": "string", "maxLength": 20 + i}
                                                           for j in range(6)},
                          "required": [f"k{i}_0"], "additionalProperties": False}
                fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}
                r = s.post("/v1/chat/completions", {"model": NAME, "messages": ask("Hi"), "max_tokens": 40,
                                                    "response_format": fmt})
                assert r.status_code == 200, r.text
            s.wait_idle()
            assert 0 < s.metric("constraint_cache_bytes") <= 1 << 20
            memo = s.metric("dfa_memo_bytes")
            assert (0 < memo <= 1 << 20) if memo_mb else memo == 0, memo
        finally:
            s.stop()


def test_one_compiles_memory_budget():
    """--compile-memory-each-mb bounds one compile whatever the pool has
    left: past it the request is a 400 naming the budget (the constraint is
    too big for this server), not a 429 (the server is busy); and the pool
    still bounds one compile when it is the smaller."""
    bomb = {"model": NAME, "messages": ask("ab"), "max_tokens": 30, "regex": "[ab]*a[ab]{17}"}
    for flags in (("--compile-memory-each-mb", "16"), ("--compile-memory-mb", "16")):
        s = Server("--compile-max-states", "100000000", "--compile-timeout-ms", "60000", *flags)
        try:
            r = s.post("/v1/chat/completions", bomb)
            assert r.status_code == 400, (flags, r.text)
            e = r.json()["error"]
            assert e["code"] == "invalid_constraint" and "memory budget" in e["message"], (flags, e)
            r = s.post("/v1/chat/completions", {"model": NAME, "messages": ask("Hi"), "max_tokens": 8,
                                                "regex": "[a-z]{1,6}"})
            assert r.status_code == 200, r.text
        finally:
            s.stop()
    # the same constraint compiles with the default budget of one compile (256 MiB)
    s = Server("--compile-max-states", "100000000", "--compile-timeout-ms", "60000")
    try:
        r = s.post("/v1/chat/completions", dict(bomb, max_tokens=24))
        assert r.status_code == 200, r.text
    finally:
        s.stop()


def test_compile_pool_under_abuse():
    """One compile thread and a compile queue of one, against slow compiles
    (exponential regexes, tens of seconds each): a cached constraint is
    still answered while the thread is busy; a compile past the queue is a
    429 with Retry-After; clients that go away cancel their compiles, waiting
    or running, and the thread is free again long before the compile's own
    time budget would have ended it."""
    s = Server("--compile-threads", "1", "--compile-queue", "1", "--compile-timeout-ms", "120000",
               "--compile-memory-mb", "2048", "--compile-memory-each-mb", "2048",
               "--compile-max-states", "100000000")
    try:
        def m(name):
            return s.metric(name)

        fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": SCHEMA}}
        cached = {"model": NAME, "messages": ask("A number and a word."), "max_tokens": 30, "temperature": 0,
                  "response_format": fmt}
        assert s.post("/v1/chat/completions", cached).status_code == 200  # compiled once: now cached

        def bomb(pattern):
            return {"model": NAME, "messages": ask("ab"), "max_tokens": 30, "regex": pattern}

        a = _raw_post(s, bomb("[ab]*a[ab]{22}"))
        assert _until(lambda: m("constraint_compiles_running") == 1)
        b = _raw_post(s, bomb("[ab]*b[ab]{22}"))
        assert _until(lambda: m("constraint_compiles_waiting") == 1)
        r = s.post("/v1/chat/completions", bomb("[ab]*a[ab]{21}b"))
        assert r.status_code == 429 and r.headers.get("retry-after"), r.text
        assert r.json()["error"]["code"] == "queue_full" and r.json()["error"]["type"] == "rate_limit_error"
        assert m("constraint_compiles_refused_total") == 1

        r = s.post("/v1/chat/completions", cached)
        assert r.status_code == 200
        jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), SCHEMA)
        assert m("constraint_compiles_running") == 1, "answered while the slow compile runs"

        b.close()  # waiting: dropped from the queue
        assert _until(lambda: m("constraint_compiles_cancelled_total") == 1 and
                      m("constraint_compiles_waiting") == 0)
        t0 = time.time()
        a.close()  # running: stopped at its next time check
        assert _until(lambda: m("constraint_compiles_running") == 0 and
                      m("constraint_compiles_cancelled_total") == 2, timeout=60)
        assert time.time() - t0 < 60
        assert _until(lambda: m("constraint_compile_memory_bytes") == 0)
        # the thread compiles again
        r = s.post("/v1/chat/completions", {"model": NAME, "messages": ask("Hi"), "max_tokens": 8,
                                            "regex": "[a-z]{1,6}"})
        assert r.status_code == 200
        still_serving(s.client())
    finally:
        s.stop()


def test_internal_fault_fails_its_requests_not_the_server(monkeypatch):
    """A step of the engine that fails on an invariant of sieve's own (here
    injected by a test hook at the third step) ends the requests in flight
    with a 500 internal_error; the engine checks itself whole and the server
    goes on serving."""
    monkeypatch.setenv("SIEVE_TEST_ENGINE_FAULT_AT_STEP", "3")
    s = Server()
    try:
        r = s.post("/v1/completions", {"model": NAME, "prompt": "Once upon a time", "max_tokens": 20,
                                       "temperature": 0})
        assert r.status_code == 500, r.text
        assert r.json()["error"]["type"] == "server_error" and r.json()["error"]["code"] == "internal_error", r.text
        assert httpx.get(s.url + "/health").status_code == 200
        assert s.metric("engine_alive") == 1 and s.metric("engine_faults_total") == 1
        m = s.wait_idle()
        assert m[f'sieve:kv_cache_usage_perc{{model_name="{NAME}"}}'] == 0
        still_serving(s.client())
    finally:
        s.stop()
