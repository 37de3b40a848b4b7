"""The server's request layer without a server (tests/server/api_cli.c).

Request bodies to the internal request: which fields are taken, which
constraint comes out and from which param, and every validation error with
its status and param. Python is the reference where there is one: json.dumps
for the JSON spelling chat templates need, re for the choice regex.
"""
import json
import math
import os
import re
import subprocess

import pytest


def api_cli():
    b = os.environ.get("API_CLI_BIN")
    assert b and os.access(b, os.X_OK), "API_CLI_BIN must name tests/api_cli"
    return b


def run(args, data):
    r = subprocess.run([api_cli()] + args, input=data.encode() if isinstance(data, str) else data,
                       capture_output=True)
    return r


def parse(kind, body):
    r = run(["parse", kind], json.dumps(body) if not isinstance(body, (str, bytes)) else body)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


USER = [{"role": "user", "content": "hi"}]


def chat(**kw):
    return parse("chat", dict(messages=USER, **kw))


def test_defaults():
    r = chat()
    assert r["n"] == 1 and r["max_tokens"] == 0 and not r["stream"] and r["constraint"] is None
    assert r["sampling"]["temperature"] == 1.0 and r["sampling"]["top_p"] == 1.0 and r["sampling"]["seed"] is None


def test_sampling_fields():
    r = chat(temperature=0.25, top_p=0.5, top_k=-1, min_p=0.1, presence_penalty=1.5, frequency_penalty=-0.5,
             repetition_penalty=1.1, seed=42, n=3, max_completion_tokens=7, max_tokens=99,
             logit_bias={"5": -100, "7": 2.5}, stop=["a", "bc"], logprobs=True, top_logprobs=4,
             stream=True, stream_options={"include_usage": True}, unknown_field={"x": 1})
    s = r["sampling"]
    assert s["temperature"] == 0.25 and s["top_p"] == 0.5 and s["top_k"] == 0 and math.isclose(s["min_p"], 0.1, rel_tol=1e-6)
    assert s["presence_penalty"] == 1.5 and s["frequency_penalty"] == -0.5 and s["seed"] == 42
    assert s["logit_bias"] == {"5": -100.0, "7": 2.5}
    assert r["n"] == 3 and r["max_tokens"] == 7  # max_completion_tokens wins
    assert r["stop"] == ["a", "bc"] and r["logprobs"] and r["top_logprobs"] == 4
    assert r["stream"] and r["include_usage"]


def test_completion_fields():
    r = parse("completion", {"prompt": "Once", "logprobs": 2, "stop": "x"})
    assert r["prompt"] == "Once" and r["logprobs"] and r["top_logprobs"] == 2 and r["stop"] == ["x"]
    r = parse("completion", {"prompt": [1, 2, 3]})
    assert r["prompt_ids"] == [1, 2, 3]
    r = parse("completion", {"prompt": ["only one"]})
    assert r["prompt"] == "only one"


@pytest.mark.parametrize("kind,body,param,fragment", [
    ("chat", {"messages": USER, "temperature": 2.5}, "temperature", "between"),
    ("chat", {"messages": USER, "temperature": "hot"}, "temperature", "number"),
    ("chat", {"messages": USER, "top_p": 0}, "top_p", "greater than 0"),
    ("chat", {"messages": USER, "n": 0}, "n", "between"),
    ("chat", {"messages": USER, "n": 17}, "n", "between"),
    ("chat", {"messages": USER, "max_tokens": 0}, "max_tokens", "between"),
    ("chat", {"messages": USER, "max_tokens": 5000}, "max_tokens", "between"),
    ("chat", {"messages": USER, "presence_penalty": 3}, "presence_penalty", "between"),
    ("chat", {"messages": USER, "logit_bias": {"x": 1}}, "logit_bias", "token id"),
    ("chat", {"messages": USER, "logit_bias": {"1000": 1}}, "logit_bias", "token id"),
    ("chat", {"messages": USER, "top_logprobs": 3}, "top_logprobs", "logprobs"),
    ("chat", {"messages": USER, "top_logprobs": 21, "logprobs": True}, "top_logprobs", "between"),
    ("chat", {"messages": USER, "stop": ["a"] * 9}, "stop", "at most"),
    ("chat", {"messages": USER, "stream_options": {"include_usage": True}}, "stream_options", "stream"),
    ("chat", {"messages": []}, "messages", "non-empty"),
    ("chat", {"messages": [{"role": "wizard", "content": "x"}]}, "messages", "role"),
    ("chat", {"messages": [{"role": "user"}]}, "messages", "missing"),
    ("chat", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages",
     "only text parts"),
    ("chat", {"messages": USER, "response_format": {"type": "xml"}}, "response_format", "json_schema"),
    ("chat", {"messages": USER, "response_format": {"type": "json_schema"}}, "response_format", "json_schema"),
    ("chat", {"messages": USER, "response_format": {"type": "json_object"}, "regex": "a"}, "regex", "one constraint"),
    ("chat", {"messages": USER, "regex": 5}, "regex", "string"),
    ("chat", {"messages": USER, "choice": []}, "choice", "non-empty"),
    ("chat", {"messages": USER, "choice": ["a", ""]}, "choice", "non-empty string"),
    ("chat", {"messages": USER, "regex": ""}, "regex", "non-empty string"),
    ("chat", {"messages": USER, "guided_json": "{not json"}, "guided_json", "not JSON"),
    ("chat", {"messages": USER, "tool_choice": "required"}, "tool_choice", "needs tools"),
    ("chat", {"messages": USER, "tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools", "name"),
    ("chat", {"messages": USER, "tools": [{"type": "function", "function": {"name": "f"}}],
              "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice", "not one of"),
    ("completion", {}, "prompt", "missing"),
    ("completion", {"prompt": ["a", "b"]}, "prompt", "batch"),
    ("completion", {"prompt": [1, 5000]}, "prompt", "outside the vocabulary"),
    ("completion", {"prompt": "x", "logprobs": 6}, "logprobs", "between"),
    ("completion", {"prompt": "x", "echo": True}, "echo", "not supported"),
])
def test_validation_errors(kind, body, param, fragment):
    r = parse(kind, body)
    assert r["status"] == 400, r
    e = r["error"]
    assert e["type"] == "invalid_request_error" and e["param"] == param, e
    assert fragment in e["message"], e


def test_error_messages_are_valid_utf8():
    # a parser message quoting ill-formed input bytes still gives a JSON error
    r = run(["parse", "chat"], b'{"messages": [{"role": "user", "content": "\\\x8d"}]}')
    e = json.loads(r.stdout)
    assert e["status"] == 400 and "not JSON" in e["error"]["message"]


def test_not_json():
    r = parse("chat", "{\"messages\": [")
    assert r["status"] == 400 and r["error"]["param"] is None and "not JSON" in r["error"]["message"]
    r = parse("chat", "[1, 2]")
    assert r["status"] == 400 and "object" in r["error"]["message"]


SCHEMA = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}, "required": ["a"]}


@pytest.mark.parametrize("field,value,param,kind", [
    ("response_format", {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA, "strict": False}},
     "response_format", "schema"),
    ("guided_json", SCHEMA, "guided_json", "schema"),
    ("guided_json", json.dumps(SCHEMA), "guided_json", "schema"),
    ("structured_outputs", {"json": SCHEMA}, "structured_outputs", "schema"),
    ("regex", "[a-z]+", "regex", "regex"),
    ("guided_regex", "[a-z]+", "guided_regex", "regex"),
    ("structured_outputs", {"regex": "[a-z]+"}, "structured_outputs", "regex"),
])
def test_constraint_sources(field, value, param, kind):
    r = chat(**{field: value})
    c = r["constraint"]
    assert c["param"] == param and c["kind"] == kind
    if kind == "schema":
        # Canonical text: compact, in the schema's own key order.
        assert c["text"] == json.dumps(SCHEMA, separators=(",", ":"))
    else:
        assert c["text"] == "[a-z]+"


def test_json_object_and_text():
    assert chat(response_format={"type": "json_object"})["constraint"]["text"] == '{"type":"object"}'
    assert chat(response_format={"type": "text"})["constraint"] is None


CHOICES = ["yes", "no", "a.b*c", "(x|y)", "[]{}", "tab\there", "ünï", "back\\slash", "-^$?+"]


@pytest.mark.parametrize("field", ["choice", "guided_choice"])
def test_choice_regex(field):
    c = chat(**{field: CHOICES})["constraint"]
    assert c["kind"] == "regex"
    rx = re.compile(c["text"])  # Python's re reads the escapes the same way
    for s in CHOICES:
        assert rx.fullmatch(s), s
    for s in ["yes ", "ye", "abbc", "x", "tab here", "a.b*cc"]:
        assert not rx.fullmatch(s), s


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                       "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                      "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}},
]


def test_tool_schema():
    import jsonschema
    r = chat(tools=TOOLS, tool_choice="required")
    c = r["constraint"]
    assert c["param"] == "tools" and c["tool_calls"] and r["tool_choice"] == "required"
    schema = json.loads(c["text"])
    v = jsonschema.Draft202012Validator(schema)
    assert v.is_valid([{"name": "get_weather", "arguments": {"city": "Paris"}}])
    assert v.is_valid([{"name": "now", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "X"}}])
    assert not v.is_valid([])
    assert not v.is_valid([{"name": "get_weather", "arguments": {}}])
    assert not v.is_valid([{"name": "other", "arguments": {}}])
    assert not v.is_valid([{"name": "now", "arguments": {"x": 1}}])
    # parallel_tool_calls true (the default): one or more calls, no cap
    assert schema["type"] == "array" and schema["minItems"] == 1 and "maxItems" not in schema
    assert r["parallel_tool_calls"]
    many = [{"name": "now", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "X"}}] * 10
    assert v.is_valid(many)
    assert json.loads(chat(tools=TOOLS, tool_choice="required", parallel_tool_calls=True)["constraint"]["text"]) == schema
    # parallel_tool_calls false: exactly one call
    one = json.loads(chat(tools=TOOLS, tool_choice="required", parallel_tool_calls=False)["constraint"]["text"])
    assert one["minItems"] == 1 and one["maxItems"] == 1 and one["items"] == schema["items"]
    v1 = jsonschema.Draft202012Validator(one)
    assert v1.is_valid(many[:1]) and not v1.is_valid(many[:2]) and not v1.is_valid([])
    # a named function: only that one
    named = chat(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "now"}})
    assert named["tool_choice"] == "named" and named["tool_name"] == "now"
    named_schema = json.loads(named["constraint"]["text"])
    assert named_schema["minItems"] == 1 and named_schema["maxItems"] == 1  # also with parallel_tool_calls true
    v = jsonschema.Draft202012Validator(named_schema)
    assert v.is_valid([{"name": "now", "arguments": {}}])
    assert not v.is_valid([{"name": "get_weather", "arguments": {"city": "Paris"}}])
    assert not v.is_valid([{"name": "now", "arguments": {}}, {"name": "now", "arguments": {}}])


def test_tools_auto_and_none():
    r = chat(tools=TOOLS)
    assert r["tool_choice"] == "auto" and r["constraint"] is None
    r = chat(tools=TOOLS, tool_choice="none", response_format={"type": "json_object"})
    assert r["tool_choice"] == "none" and r["constraint"]["param"] == "response_format"
    # required tools take precedence over response_format, which then shapes nothing
    r = chat(tools=TOOLS, tool_choice="required", response_format={"type": "json_object"})
    assert r["constraint"]["param"] == "tools"


def calls(mode, text, tools=TOOLS):
    r = run(["calls", mode], json.dumps({"text": text, "tools": tools}))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_calls_from_output():
    out = calls("array", json.dumps([{"name": "get_weather", "arguments": {"city": "Paris"}}]))
    (c,) = out["calls"]
    assert c["type"] == "function" and c["id"].startswith("call_")
    assert c["function"]["name"] == "get_weather" and json.loads(c["function"]["arguments"]) == {"city": "Paris"}
    assert calls("array", "[]")["calls"] is None and calls("array", "[{\"name\": 1}]")["calls"] is None

    text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n' \
           '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>'
    out = calls("text", text)
    assert [c["function"]["name"] for c in out["calls"]] == ["get_weather", "now"]
    assert text[:out["content_len"]] == "Let me check."
    out = calls("text", '{"name": "get_weather", "parameters": {"city": "Rome"}}')
    assert json.loads(out["calls"][0]["function"]["arguments"]) == {"city": "Rome"} and out["content_len"] == 0
    assert calls("text", "Just text.")["calls"] is None
    assert calls("text", '<tool_call>{"name": "unknown", "arguments": {}}</tool_call>')["calls"] is None


PYJSON = [
    {"a": 1, "b": [1.5, -0.0, 1e16, 1e-5, 0.1, 123456789.125, 1e300, 5e-324, 2.0, 100.0, 1e15, 12345678901234567.0],
     "c": None, "d": True, "e": "naïve \"quoted\" \\ \n\t\x01 日本 🤖", "f": {}, "g": [], "h": -7},
    [0.30000000000000004, 1 / 3, 2 ** 53, -2 ** 63],
    "just a string",
]


@pytest.mark.parametrize("value", PYJSON)
def test_pyjson_is_json_dumps(value):
    r = run(["pyjson"], json.dumps(value))
    assert r.returncode == 0
    assert r.stdout.decode() == json.dumps(value, ensure_ascii=False)


SCAN_CASES = [
    (True, [{"name": "get_weather", "arguments": {"city": "Paris \"le\" {x}", "days": [1, {"a": "]"}]}},
            {"name": "now", "arguments": {}}]),
    (False, {"name": "f", "arguments": {"q": "naïve } ]", "n": -1.5e-3, "b": True, "z": None}}),
]


@pytest.mark.parametrize("array,value", SCAN_CASES)
@pytest.mark.parametrize("sep", [(", ", ": "), (",", ":")])
def test_scan_calls_on_every_prefix(array, value, sep):
    """What a stream sends for each prefix of a call list is a prefix of the
    final arguments, and the whole text gives exactly the calls json.loads
    reads (json.dumps as the reference spelling, canonical and compact)."""
    text = json.dumps(value, ensure_ascii=False, separators=sep)
    want = value if array else [value]
    data = text.encode()
    last = None
    for cut in range(len(data) + 1):
        prefix = data[:cut]
        try:
            prefix.decode()
        except UnicodeDecodeError:
            continue  # the engine's text deltas are whole characters
        r = run(["scan", "array" if array else "object"], prefix)
        assert r.returncode == 0
        got = json.loads(r.stdout)
        assert len(got) <= len(want)
        for g, w in zip(got, want):
            assert g["name"] == w["name"]
            full = json.dumps(w["arguments"], ensure_ascii=False, separators=sep)
            assert full.startswith(g["args"]) and g["done"] == (g["args"] == full)
        if last is not None:
            assert len(got) >= len(last)
        last = got
    assert [(g["name"], json.loads(g["args"])) for g in last] == [(w["name"], w["arguments"]) for w in want]
    assert all(g["done"] for g in last)


def test_scan_many_calls():
    """Any number of calls streams: 20 (the old cap was 8), at cuts through
    every call, each prefix giving the calls so far (api_cli scans into a
    2-entry buffer first, then into one of the count it returned, as the
    server grows its per-choice arrays, and checks the two agree)."""
    want = [{"name": f"tool_{i}", "arguments": {"i": i, "s": "x" * (i % 5), "l": [i, {"k": "]}"}]}}
            for i in range(20)]
    text = json.dumps(want)
    data = text.encode()
    seen = []
    for cut in list(range(0, len(data), 23)) + [len(data)]:
        r = run(["scan", "array"], data[:cut])
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        for g, w in zip(got, want):
            full = json.dumps(w["arguments"])
            assert g["name"] == w["name"] and full.startswith(g["args"]) and g["done"] == (g["args"] == full)
        seen.append(len(got))
    assert seen == sorted(seen) and seen[-1] == 20 and len(set(seen)) > 10
    r = run(["scan", "array"], data)
    assert [(g["name"], json.loads(g["args"]), g["done"]) for g in json.loads(r.stdout)] == \
        [(w["name"], w["arguments"], True) for w in want]


def test_auto_tools_with_response_format_is_a_union():
    """tools "auto" + response_format: the model may call (a JSON call list)
    or answer as response_format says; $defs move to the root so that the
    answer's references still resolve (checked with jsonschema)."""
    import jsonschema
    answer = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "$defs": {"P": {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}},
              "type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "required": ["p"]}
    r = chat(tools=TOOLS, response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": answer}})
    c = r["constraint"]
    assert c["param"] == "response_format" and not c["tool_calls"]
    u = json.loads(c["text"])
    assert "$defs" in u and len(u["anyOf"]) == 2
    v = jsonschema.Draft202012Validator(u)
    assert v.is_valid({"p": {"n": "x"}})
    assert v.is_valid([{"name": "get_weather", "arguments": {"city": "Paris"}}])
    assert not v.is_valid({"p": {"n": 1}})
    assert not v.is_valid({"q": 1})
    assert not v.is_valid([{"name": "nope", "arguments": {}}])
    # json_object too
    u = json.loads(chat(tools=TOOLS, response_format={"type": "json_object"})["constraint"]["text"])
    assert u["anyOf"][1] == {"type": "object"}
    # a schema whose references cannot move keeps response_format alone
    rec = {"type": "object", "properties": {"child": {"$ref": "#"}}}
    c = chat(tools=TOOLS, response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": rec}})
    assert json.loads(c["constraint"]["text"]) == rec
    # tool_choice none: response_format alone
    c = chat(tools=TOOLS, tool_choice="none", response_format={"type": "json_object"})
    assert c["constraint"]["text"] == '{"type":"object"}'


def test_errors_map_to_http_statuses_by_code():
    """One table decides the HTTP status of a failure, by its typed code:
    the client's faults and the server's budgets are 400s, a full server is a
    429, a stopped engine a 503, and sieve's own faults are 500s."""
    rows = {r["name"]: r for r in json.loads(run(["errors"], "").stdout)}
    want = {"syntax": 400, "unsupported": 400, "empty": 400, "budget": 400, "timeout": 400, "arg": 400,
            "capacity": 429, "io": 503, "nomem": 500, "internal": 500, "cancelled": 499,
            "not_found": 404}
    assert {k: rows[k]["http"] for k in want} == want
    assert set(rows) == set(want) | {"ok"}
    for name, status in want.items():
        e = rows[name]["compile_error"]["error"]
        if name == "not_found":
            status = 500  # a compile looks nothing up: its not_found is sieve's fault
        assert rows[name]["compile_status"] == status
        if status == 400:
            assert e["code"] == "invalid_constraint" and e["param"] == "response_format", e
        elif status == 429:
            # the compile pool is full: the server is busy, the schema is fine
            assert e["code"] == "queue_full" and e["param"] is None, e
        else:
            assert e["code"] == "internal_error" and e["param"] is None, e


def test_no_error_path_reads_message_text():
    """Statuses come from codes (sv_api_http_status), never from searching an
    error's message."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    for f in list((root / "src").rglob("*.c")) + list((root / "fsm").rglob("*.c")):
        text = f.read_text()
        assert not re.search(r"str(?:str|ncmp|cmp|casecmp)\([^;\n]*(?:->|\.)(?:message|text)\b", text), f


def test_nul_is_data_in_schemas_only():
    """\\u0000 is accepted where it is data, in a schema (a real pattern:
    "^/[^\\u0000]+$"), and the constraint keeps it; in text for the model or
    in a name it is a 400 naming the field, never a silent truncation."""
    pat = {"type": "string", "pattern": "^/[^\u0000]+$"}
    r = parse("chat", {"model": "m", "messages": USER,
                       "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": pat}}})
    assert json.loads(r["constraint"]["text"]) == pat
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"p": {"type": "string", "pattern": "^[^\u0000]*$"}}}}}]
    r = parse("chat", {"model": "m", "messages": USER, "tools": tools, "tool_choice": "required"})
    assert "\\u0000" in r["constraint"]["text"]
    for body, where in [({"model": "m", "messages": [{"role": "user", "content": "a\u0000b"}]}, "messages[0].content"),
                        ({"model": "m\u0000x", "messages": USER}, "model"),
                        ({"model": "m", "messages": USER, "stop": ["x\u0000"]}, "stop[0]"),
                        ({"model": "m", "messages": USER, "tools": [{"type": "function", "function": {"name": "f\u0000g"}}]},
                         "tools[0].function.name")]:
        e = parse("chat", body)
        assert e["status"] == 400 and e["error"]["message"].startswith(where + ": contains NUL"), e


def test_body_edge_cases():
    # a key given twice keeps its last value, as Python's json does
    r = parse("chat", '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "max_tokens": 7}')
    assert r["max_tokens"] == 7
    # deep nesting, invalid UTF-8, NUL in a key: 400s
    deep = '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "user": ' + "[" * 5000 + "]" * 5000 + "}"
    bad = [deep.encode(), b'{"model": "m", "messages": [{"role": "user", "content": "\xff\xfe"}]}',
           b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "a\\u0000b": 1}']
    for body in bad:
        e = parse("chat", body)
        assert e["status"] == 400 and e["error"]["type"] == "invalid_request_error", e
    # numbers beyond int64 and doubles, and huge values, in every numeric field
    for field in ["max_tokens", "n", "seed", "top_logprobs", "temperature", "top_p", "top_k", "min_p",
                  "presence_penalty", "frequency_penalty", "max_completion_tokens"]:
        for v in ["1e400", "-1e400", "18446744073709551616", "-9223372036854775809", "1e308", "9223372036854775807"]:
            e = parse("chat", '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "%s": %s}' % (field, v))
            if "status" in e:
                assert e["status"] == 400, (field, v, e)
            else:  # accepted: then within its documented bound
                assert field == "seed" and v == "9223372036854775807", (field, v, e)
    e = parse("chat", {"model": "m", "messages": USER, "logit_bias": {str(i): 1 for i in range(5000)}})
    assert e["status"] == 400 and e["error"]["param"] == "logit_bias", e
    e = parse("chat", {"model": "m", "messages": USER, "stop": ["s%d" % i for i in range(1000)]})
    assert e["status"] == 400 and e["error"]["param"] == "stop", e
