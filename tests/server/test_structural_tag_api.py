"""`response_format: {"type": "structural_tag", ...}` through a live server
(the default model): the content is the generated text with its tags, as
vLLM returns it, and it is judged independently: Python's re parses the
tags out, jsonschema validates the JSON inside them. The language itself
is tested in tests/grammar/test_structural_tag.py."""
import json
import re

import jsonschema
import openai
import pytest

from live import NAME

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "days"], "additionalProperties": False}


def ask(text):
    return [{"role": "user", "content": text}]


def call_tag(name):
    return {"begin": '<tool_call>{"name": "%s", "arguments": ' % name,
            "content": {"type": "json_schema", "json_schema": WEATHER}, "end": "}</tool_call>"}


CALL_RE = r'<tool_call>\{"name": "(\w+)", "arguments": (\{.*?\})\}</tool_call>'


def test_calls_after_text(client):
    """A word of text, then one or more calls (at_least_one), then free
    text: each call's arguments validate."""
    rf = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "regex", "pattern": "[A-Z][a-z]{1,8}: "},
        {"type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True,
         "tags": [call_tag("weather"), call_tag("forecast")]}]}}
    for seed in (1, 2):
        r = client.chat.completions.create(model=NAME, messages=ask("What is the weather in Paris?"), max_tokens=60,
                                           temperature=1.0, seed=seed, response_format=rf)
        text = r.choices[0].message.content
        m = re.match(r"[A-Z][a-z]{1,8}: ", text)
        assert m, text
        rest = text[m.end():]
        calls = list(re.finditer(CALL_RE, rest, re.S))
        assert calls and calls[0].start() == 0, text
        for c in calls:
            assert c.group(1) in ("weather", "forecast"), text
            jsonschema.validate(json.loads(c.group(2)), WEATHER)
        # what is left between and after the calls is free text without a trigger
        assert "<tool_call>" not in re.sub(CALL_RE, "", rest, flags=re.S), text


def test_legacy_form(server):
    """vLLM's and SGLang's legacy form, over plain HTTP; with a budget cut
    the output still ends inside the language (free text)."""
    rf = {"type": "structural_tag", "triggers": ["<function="],
          "structures": [{"begin": "<function=weather>", "schema": WEATHER, "end": "</function>"}]}
    r = server.post("/v1/chat/completions", {"model": NAME, "messages": ask("Hi."), "max_tokens": 20, "seed": 3,
                                             "temperature": 1.0, "response_format": rf})
    assert r.status_code == 200, r.text
    text = r.json()["choices"][0]["message"]["content"]
    for m in re.finditer(r"<function=weather>(.*?)</function>", text, re.S):
        jsonschema.validate(json.loads(m.group(1)), WEATHER)
    assert "<function=" not in re.sub(r"<function=weather>.*?</function>", "", text, flags=re.S), text


def test_exactly_one_call(client):
    rf = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"],
                                               "at_least_one": True, "stop_after_first": True,
                                               "tags": [call_tag("weather")]}}
    r = client.chat.completions.create(model=NAME, messages=ask("Weather in Oslo?"), max_tokens=60, temperature=0,
                                       response_format=rf)
    text = r.choices[0].message.content
    m = re.fullmatch(CALL_RE, text, re.S)
    assert m and m.group(1) == "weather", text
    jsonschema.validate(json.loads(m.group(2)), WEATHER)
    assert r.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("fmt, where, words", [
    ({"type": "triggered_tags", "triggers": ["<a"], "tags": [
        {"begin": "<b>", "content": {"type": "const_string", "value": "x"}, "end": "</b>"}]},
     "/format/tags/0/begin", "none of the triggers"),
    ({"type": "tag", "begin": "<x>", "end": "</x>", "content": {
        "type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"minimum": "z"}}}}},
     "/format/content/json_schema/properties/a/minimum", "minimum"),
    ({"type": "nope"}, "/format/type", "unknown format type"),
])
def test_errors(client, fmt, where, words):
    """A bad structural tag is a 400 naming response_format, the part's
    JSON pointer and what is wrong."""
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=NAME, messages=ask("Hi."), max_tokens=5,
                                       response_format={"type": "structural_tag", "format": fmt})
    body = e.value.body
    assert body["param"] == "response_format" and "the structural tag does not compile" in body["message"], body
    assert where in body["message"] and words in body["message"], body


def test_batch_checks_structural_tags(tmp_path):
    """`sieve batch` checks each answer against its structural tag again
    (src/batch/output.c): a valid one is written, one spoiled as a compiler
    bug would spoil it (a test hook) is a validation_failed error line."""
    import os
    import subprocess

    from live import MODEL, sieve_bin
    rf = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"],
                                               "at_least_one": True, "stop_after_first": True,
                                               "tags": [call_tag("weather")]}}
    lines = [{"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
              "body": {"model": "smol", "messages": ask("Weather in Rome?"), "max_tokens": 50, "temperature": 0,
                       "response_format": rf}} for cid in ("ok", "spoiled")]
    inp, out, errs = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    inp.write_text("".join(json.dumps(l) + "\n" for l in lines))
    env = dict(os.environ, SIEVE_TEST_BATCH_SPOIL="spoiled")
    r = subprocess.run([sieve_bin(), "batch", "-m", str(MODEL), "-i", str(inp), "-o", str(out), "--errors", str(errs),
                        "--threads", "2"], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    (good,) = [json.loads(l) for l in out.read_text().splitlines()]
    (bad,) = [json.loads(l) for l in errs.read_text().splitlines()]
    assert good["custom_id"] == "ok" and bad["custom_id"] == "spoiled"
    assert bad["error"]["code"] == "validation_failed", bad["error"]
    text = good["response"]["body"]["choices"][0]["message"]["content"]
    m = re.fullmatch(CALL_RE, text, re.S)
    assert m, text
    jsonschema.validate(json.loads(m.group(2)), WEATHER)
    assert "1 valid, 1 failed" in r.stderr, r.stderr


@pytest.mark.parametrize("as_text", [True, False])
def test_vllm_structured_outputs_structural_tag(client, as_text):
    """vLLM's structured_outputs.structural_tag: the structural tag's JSON
    text (or the object), with or without its "type"."""
    tag = {"format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True,
                      "stop_after_first": True, "tags": [call_tag("weather")]}}
    v = json.dumps(tag) if as_text else tag
    r = client.chat.completions.create(model=NAME, messages=ask("Weather in Oslo?"), max_tokens=60, temperature=0,
                                       extra_body={"structured_outputs": {"structural_tag": v}})
    m = re.fullmatch(CALL_RE, r.choices[0].message.content, re.S)
    assert m, r.choices[0].message.content
    jsonschema.validate(json.loads(m.group(2)), WEATHER)
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model=NAME, messages=ask("Hi"), max_tokens=5,
                                       extra_body={"structured_outputs": {"structural_tag": "{not json"}})
    assert ei.value.body["param"] == "structured_outputs" and "not JSON" in ei.value.body["message"]
