"""Tools through the real `openai` client: required, named, parallel and auto
calls, arguments valid under each tool's parameters (Python jsonschema), and
streamed tool-call deltas that reassemble to the unstreamed call."""
import json
import re

import jsonschema
import openai
import pytest

from live import NAME

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                            "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
TIME = {"type": "object", "properties": {"timezone": {"type": "string", "pattern": "^[A-Z][a-z]+/[A-Z][a-z]+$"}},
        "required": ["timezone"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The current weather in a city",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "description": "The time in a time zone",
                                      "parameters": TIME}},
]
PARAMS = {"get_weather": WEATHER, "get_time": TIME}


def ask(text):
    return [{"role": "user", "content": text}]


def check_calls(calls, names=None):
    assert calls, "no tool calls"
    ids = set()
    for c in calls:
        assert c.type == "function" and c.id.startswith("call_") and c.id not in ids
        ids.add(c.id)
        assert c.function.name in (names or PARAMS)
        assert isinstance(c.function.arguments, str)
        jsonschema.validate(json.loads(c.function.arguments), PARAMS[c.function.name])


def test_required(client):
    r = client.chat.completions.create(model=NAME, messages=ask("What's the weather like in Paris?"),
                                       tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                                       max_tokens=80, temperature=0.7, seed=2)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and c.message.content is None
    assert len(c.message.tool_calls) == 1
    check_calls(c.message.tool_calls)


def test_named(client):
    r = client.chat.completions.create(model=NAME, messages=ask("What time is it in Tokyo?"), tools=TOOLS,
                                       tool_choice={"type": "function", "function": {"name": "get_time"}},
                                       max_tokens=60, temperature=0.7, seed=3)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1
    check_calls(c.message.tool_calls, names=["get_time"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_parallel(client, seed):
    r = client.chat.completions.create(model=NAME, messages=ask("Weather in Paris and in Rome, and the time in "
                                                                "Europe/Paris?"),
                                       tools=TOOLS, tool_choice="required", parallel_tool_calls=True,
                                       max_tokens=200, temperature=1.0, seed=seed)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert len(c.message.tool_calls) >= 1  # no cap on parallel calls (max_tokens bounds them)
    check_calls(c.message.tool_calls)


def few_shot(question):
    """A conversation whose earlier turns are calls: the model then calls."""
    msgs = []
    for i, city in enumerate(["Paris", "Rome", "Oslo"]):
        msgs.append({"role": "user", "content": f"Weather in {city}?"})
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{i}", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city, "unit": "celsius"})}}]})
    msgs.append({"role": "user", "content": question})
    return msgs


def test_arguments_in_definition_order(client):
    """A tool's arguments come in the order its parameters define them, even
    where the conversation shows another order that a response_format schema
    would take (its required list's): the server compiles tool calls with the
    definition order alone (src/server/server.c constraint_opts), and the
    first key is forced."""
    params = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                               "unit": {"enum": ["celsius", "fahrenheit"]}},
              "required": ["unit", "city"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": params}}]
    msgs = []
    for i, city in enumerate(["Paris", "Rome", "Oslo"]):
        msgs.append({"role": "user", "content": f"Weather in {city}?"})
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{i}", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"unit": "celsius", "city": city})}}]})
    msgs.append({"role": "user", "content": "Weather in London?"})
    for seed in range(4):
        r = client.chat.completions.create(model=NAME, messages=msgs, tools=tools, tool_choice="required",
                                           parallel_tool_calls=False, max_tokens=60, temperature=0.8, seed=seed)
        (call,) = r.choices[0].message.tool_calls
        args = json.loads(call.function.arguments)
        jsonschema.validate(args, params)
        assert list(args) == ["city", "unit"], call.function.arguments


def test_auto_calls(client):
    r = client.chat.completions.create(model=NAME, messages=few_shot("Weather in London?"), tools=TOOLS,
                                       max_tokens=60, temperature=0)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c.message
    check_calls(c.message.tool_calls)


def test_auto_call_is_constrained(client):
    """Once the model starts a call in auto mode, the call follows the tool's schema.

    The earlier turns show full city names; this tool's schema only takes
    three capital letters, which the model would not write on its own."""
    code = {"type": "object", "properties": {"city": {"type": "string", "pattern": "^[A-Z]{3}$"},
                                             "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather by airport code",
                                               "parameters": code}}]
    for stream in (False, True):
        kw = dict(model=NAME, messages=few_shot("Weather in London?"), tools=tools, max_tokens=60, temperature=0)
        if stream:
            calls, content, finish = reassemble(client.chat.completions.create(stream=True, **kw))
            assert finish == "tool_calls" and len(calls) == 1
            name, args = calls[0]["name"], calls[0]["arguments"]
        else:
            r = client.chat.completions.create(**kw)
            c = r.choices[0]
            assert c.finish_reason == "tool_calls", c.message
            (call,) = c.message.tool_calls
            name, args = call.function.name, call.function.arguments
            assert r.usage.completion_tokens >= len(args) // 8  # the call's tokens are counted
        assert name == "get_weather"
        jsonschema.validate(json.loads(args), code)
    # The default model's family is ChatML: auto is one structural tag
    # (tools.h), so n > 1 and a full list of stop strings are fine, and every
    # choice that calls calls validly.
    r = client.chat.completions.create(model=NAME, messages=few_shot("Weather in London?"), tools=tools,
                                       max_tokens=60, temperature=1.0, seed=5, n=3,
                                       stop=[f"S{i}" for i in range(8)])
    assert len(r.choices) == 3
    called = [c for c in r.choices if c.message.tool_calls]
    assert called, [c.message for c in r.choices]
    for c in called:
        assert c.finish_reason == "tool_calls"
        for call in c.message.tool_calls:
            assert call.function.name == "get_weather"
            jsonschema.validate(json.loads(call.function.arguments), code)
    # Named, n = 2 is constrained in every choice.
    r = client.chat.completions.create(model=NAME, messages=few_shot("Weather in London?"), tools=tools,
                                       tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                       max_tokens=60, temperature=1.0, seed=3, n=2)
    assert len(r.choices) == 2
    for c in r.choices:
        jsonschema.validate(json.loads(c.message.tool_calls[0].function.arguments), code)


def test_auto_answers_text(client):
    r = client.chat.completions.create(model=NAME, messages=ask("Write one sentence about spring."), tools=TOOLS,
                                       tool_choice="auto", max_tokens=30, temperature=0)
    c = r.choices[0]
    assert c.message.tool_calls is None and c.message.content and c.finish_reason in ("stop", "length")


def test_auto_refuses_tools_it_cannot_constrain(client, server):
    """auto compiles the call constraint before the first token: a tool whose
    parameters sieve cannot compile is a 400 naming `tools` and the keyword,
    for a text answer as much as for a call (the model might call that tool),
    not a call cut off or read from free text. Then the same request with
    good tools answers, and its call constraint is cached: the second phase
    of a later call does not compile again."""
    bad = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                     "uniqueItems": True}}}
    tools = TOOLS + [{"type": "function", "function": {"name": "tag", "parameters": bad}}]
    for stream in (False, True):
        for msgs in (ask("Write one sentence about spring."), few_shot("Weather in London?")):
            with pytest.raises(openai.BadRequestError) as ei:
                r = client.chat.completions.create(model=NAME, messages=msgs, tools=tools, max_tokens=30,
                                                   temperature=0, stream=stream)
                if stream:
                    list(r)
            body = ei.value.body
            assert ei.value.status_code == 400 and body["param"] == "tools", body
            assert "uniqueItems" in body["message"] and \
                "/2/function/parameters/properties/tags/uniqueItems" in body["message"], body
    # The first phase runs while the calls compile, its output held: a
    # compile that fails late (a budget, a few hundred ms) after a first
    # phase of one token is still the reply, and the server serves on.
    slow = {"type": "object", "properties": {"k": {"type": "string", "pattern": "^(a|b)*a(a|b){18}$"}}}
    tools = TOOLS + [{"type": "function", "function": {"name": "slow", "parameters": slow}}]
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as ei:
            r = client.chat.completions.create(model=NAME, messages=ask("Hi"), tools=tools, max_tokens=1,
                                               temperature=0, stream=stream)
            if stream:
                list(r)
        # (the state budget; the time budget under a sanitizer build)
        assert ei.value.body["param"] == "tools" and ei.value.body["code"] == "invalid_constraint", ei.value.body
    # the same tools less the bad one: a call, valid, and the calls' compile
    # happened before it (the compile histogram counts it once)
    def compiles():
        return server.metric("constraint_compile_seconds_count")
    tools = [dict(t) for t in TOOLS]
    tools[1] = {"type": "function", "function": dict(TOOLS[1]["function"], description="Time, again")}
    tools[0]["function"] = dict(TOOLS[0]["function"], parameters=dict(WEATHER, title="w2"))  # a fresh schema
    n0 = compiles()
    r = client.chat.completions.create(model=NAME, messages=few_shot("Weather in London?"), tools=tools,
                                       max_tokens=60, temperature=0)
    assert r.choices[0].finish_reason == "tool_calls", r.choices[0].message
    check_calls(r.choices[0].message.tool_calls)
    assert compiles() == n0 + 1
    r = client.chat.completions.create(model=NAME, messages=few_shot("Weather in Oslo?"), tools=tools,
                                       max_tokens=60, temperature=0)
    check_calls(r.choices[0].message.tool_calls)
    assert compiles() == n0 + 1  # cached


def test_none_ignores_tools(client):
    r = client.chat.completions.create(model=NAME, messages=few_shot("Weather in London?"), tools=TOOLS,
                                       tool_choice="none", max_tokens=20, temperature=0)
    assert r.choices[0].message.tool_calls is None


def reassemble(chunks):
    calls, content, finish = {}, "", None
    for ch in chunks:
        for c in ch.choices:
            content += c.delta.content or ""
            for d in c.delta.tool_calls or []:
                cur = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                if d.id:
                    cur["id"] = d.id
                if d.function and d.function.name:
                    cur["name"] += d.function.name
                if d.function and d.function.arguments:
                    cur["arguments"] += d.function.arguments
                    cur["fragments"] = cur.get("fragments", 0) + 1
            finish = c.finish_reason or finish
    return [calls[i] for i in sorted(calls)], content, finish


@pytest.mark.parametrize("kw", [
    dict(messages=ask("Weather in Paris and Rome?"), tool_choice="required"),
    dict(messages=ask("Time in Berlin?"), tool_choice={"type": "function", "function": {"name": "get_time"}}),
    dict(messages=few_shot("Weather in London?")),
])
def test_streamed_calls_reassemble(client, kw):
    kw = dict(model=NAME, tools=TOOLS, max_tokens=150, temperature=0, **kw)
    whole = client.chat.completions.create(**kw).choices[0]
    chunks = list(client.chat.completions.create(stream=True, **kw))
    calls, content, finish = reassemble(chunks)
    assert finish == whole.finish_reason == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == \
        [(c.function.name, json.loads(c.function.arguments)) for c in whole.message.tool_calls]
    assert all(c["id"] and c["id"].startswith("call_") for c in calls)
    # the arguments arrive as they are generated, in several fragments
    assert all(c["fragments"] > 1 for c in calls), calls


def test_many_parallel_calls(client):
    """More calls than the old cap of 8, whole and streamed. Every token with
    a "]" in it is biased away, so the model never closes the list on its
    own: the budget rule closes it before max_tokens, and the stream's
    per-choice call arrays grow past their first allocation."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tokenizer"))
    import gguf_io
    from live import MODEL
    tokens = gguf_io.read(str(MODEL))[0]["tokenizer.ggml.tokens"]
    no_close = {str(i): -100 for i, t in enumerate(tokens) if "]" in t}
    city = {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome", "Oslo"]}}, "required": ["city"],
            "additionalProperties": False}
    empty = {"type": "object", "properties": {}, "additionalProperties": False}
    params = {"get_weather": city, "now": empty}
    tools = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in params.items()]
    kw = dict(model=NAME, messages=ask("Weather in Paris, Rome and Oslo, and the time, many times over."),
              tools=tools, tool_choice="required", max_tokens=250, temperature=0, logit_bias=no_close)
    r = client.chat.completions.create(**kw)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and r.usage.completion_tokens <= 250
    assert len(c.message.tool_calls) > 8
    for call in c.message.tool_calls:
        jsonschema.validate(json.loads(call.function.arguments), params[call.function.name])
    calls, content, finish = reassemble(client.chat.completions.create(stream=True, **kw))
    assert finish == "tool_calls" and not content
    assert [(x["name"], json.loads(x["arguments"])) for x in calls] == \
        [(x.function.name, json.loads(x.function.arguments)) for x in c.message.tool_calls]
    assert len({x["id"] for x in calls}) == len(calls)


def test_tool_result_round_trip(client):
    """A tool result goes back in; the model answers (any text or call is fine; the request must parse)."""
    msgs = few_shot("Weather in London?")
    msgs.append({"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_x", "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": "London", "unit": "celsius"})}}]})
    msgs.append({"role": "tool", "tool_call_id": "call_x", "content": "12 degrees, rain"})
    r = client.chat.completions.create(model=NAME, messages=msgs, tools=TOOLS, max_tokens=20, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_tools_with_response_format(client):
    """required tools win over response_format; with tool_choice none the text follows response_format."""
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 30}}, "required": ["answer"]}
    rf = {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    r = client.chat.completions.create(model=NAME, messages=ask("Weather in Paris?"), tools=TOOLS,
                                       tool_choice="required", response_format=rf, max_tokens=80, temperature=0)
    check_calls(r.choices[0].message.tool_calls)
    r = client.chat.completions.create(model=NAME, messages=ask("Weather in Paris?"), tools=TOOLS,
                                       tool_choice="none", response_format=rf, max_tokens=80, temperature=0)
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_auto_with_response_format(client):
    """auto + response_format: an answer valid under response_format, or calls valid under the tools."""
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 30}}, "required": ["answer"],
              "additionalProperties": False}
    rf = {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    kinds = set()
    for msgs in (ask("Say something about Paris."), few_shot("Weather in London?")):
        for stream in (False, True):
            kw = dict(model=NAME, messages=msgs, tools=TOOLS, response_format=rf, max_tokens=80, temperature=0)
            if stream:
                calls, content, finish = reassemble(client.chat.completions.create(stream=True, **kw))
                if calls:
                    assert finish == "tool_calls"
                    for c in calls:
                        jsonschema.validate(json.loads(c["arguments"]), PARAMS[c["name"]])
                else:
                    jsonschema.validate(json.loads(content), schema)
            else:
                c = client.chat.completions.create(**kw).choices[0]
                if c.message.tool_calls:
                    check_calls(c.message.tool_calls)
                    kinds.add("calls")
                else:
                    jsonschema.validate(json.loads(c.message.content), schema)
                    kinds.add("answer")
    assert "answer" in kinds


def test_auto_with_response_format_error_points_into_the_answer(client):
    import openai
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=x)y"}}}
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model=NAME, messages=ask("x"), tools=TOOLS, max_tokens=5, response_format={
            "type": "json_schema", "json_schema": {"name": "a", "schema": schema}})
    body = ei.value.body
    assert body["param"] == "response_format" and "/properties/a/pattern" in body["message"]
    assert "anyOf" not in body["message"]


def few_shot_said(question, said):
    """few_shot, where each earlier call comes after a sentence and two calls
    are made at once: the model then writes text and then its calls."""
    msgs = []
    for i, (a, b) in enumerate([("Paris", "Rome"), ("Oslo", "Lima"), ("Kyiv", "Bern")]):
        msgs.append({"role": "user", "content": f"Weather in {a} and {b}?"})
        msgs.append({"role": "assistant", "content": said, "tool_calls": [{
            "id": f"call_{i}{k}", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city, "unit": "celsius"})}}
            for k, city in enumerate((a, b))]})
    msgs.append({"role": "user", "content": question})
    return msgs


def test_auto_text_then_parallel_calls(client):
    """auto for ChatML is one structural tag (tools.h): the text before the
    first <tool_call> is the content, streamed as it comes, and every call
    after it is constrained, any number of them; with parallel_tool_calls
    false the model is held to one."""
    said = "Let me look that up."
    kw = dict(model=NAME, tools=TOOLS, max_tokens=120, temperature=0,
              messages=few_shot_said("Weather in Cairo and Quito?", said))
    whole = client.chat.completions.create(**kw).choices[0]
    assert whole.finish_reason == "tool_calls", whole.message
    assert whole.message.content == said
    assert len(whole.message.tool_calls) == 2
    check_calls(whole.message.tool_calls)
    chunks = list(client.chat.completions.create(stream=True, **kw))
    calls, content, finish = reassemble(chunks)
    assert (content, finish) == (said, "tool_calls")
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == \
        [(c.function.name, json.loads(c.function.arguments)) for c in whole.message.tool_calls]
    kinds = [k for ch in chunks for c in ch.choices
             for k in (["content"] if c.delta.content else []) + (["call"] if c.delta.tool_calls else [])]
    assert kinds.index("call") > max(i for i, k in enumerate(kinds) if k == "content"), kinds
    one = client.chat.completions.create(parallel_tool_calls=False, **kw).choices[0]
    assert one.finish_reason == "tool_calls" and len(one.message.tool_calls) == 1
    check_calls(one.message.tool_calls)


@pytest.mark.parametrize("family", ["llama3", "gemma"])
def test_auto_list_families(family):
    """auto for the families whose prompt asks for a JSON list of calls (the
    same model under --chat-template): one structural tag, text or the list
    from its [{"name" on; the calls stream and reassemble, n > 1 works, and
    a call list the model starts is held to the tools. (Mistral's family
    takes the same path; the 135M model does not call under its template.)"""
    from live import Server
    g = Server("--chat-template", family)
    try:
        c = g.client()
        kw = dict(model=NAME, tools=TOOLS, max_tokens=120, temperature=0,
                  messages=few_shot_said("Weather in Cairo and Quito?", None))
        whole = c.chat.completions.create(**kw).choices[0]
        assert whole.finish_reason == "tool_calls", whole.message
        check_calls(whole.message.tool_calls)
        calls, content, finish = reassemble(list(c.chat.completions.create(stream=True, **kw)))
        assert finish == "tool_calls"
        assert [(x["name"], json.loads(x["arguments"])) for x in calls] == \
            [(x.function.name, json.loads(x.function.arguments)) for x in whole.message.tool_calls]
        r = c.chat.completions.create(n=2, **dict(kw, temperature=1.0, seed=4))
        assert len(r.choices) == 2
        for ch in r.choices:
            if ch.message.tool_calls:
                check_calls(ch.message.tool_calls)
            else:
                assert ch.message.content is not None
        one = c.chat.completions.create(parallel_tool_calls=False, **kw).choices[0]
        assert one.finish_reason == "tool_calls" and len(one.message.tool_calls) == 1
        check_calls(one.message.tool_calls)
        bad = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
        with pytest.raises(openai.BadRequestError) as ei:
            c.chat.completions.create(**dict(kw, tools=TOOLS + [{"type": "function", "function": {
                "name": "tag", "parameters": bad}}]))
        assert ei.value.body["param"] == "tools"
        assert "/2/function/parameters/properties/tags/uniqueItems" in ei.value.body["message"], ei.value.body
    finally:
        g.stop()
