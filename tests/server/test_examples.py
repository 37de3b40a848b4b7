"""The examples run against a live server (examples/)."""
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from live import Server

ROOT = Path(__file__).resolve().parents[2]


def test_batch_extraction_example(tmp_path):
    """examples/batch_extraction: texts in, validated records out, through the
    openai SDK's Files and Batch API."""
    s = Server("--data-dir", str(tmp_path / "data"), api_key=None)
    try:
        out = tmp_path / "people.jsonl"
        r = subprocess.run([sys.executable, str(ROOT / "examples" / "batch_extraction" / "extract.py"),
                            "--base-url", s.url + "/v1", "--out", str(out)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        sys.path.insert(0, str(ROOT / "examples" / "batch_extraction"))
        from extract import PERSON
        recs = [json.loads(l) for l in out.read_text().splitlines()]
        texts = sorted(p.name for p in (ROOT / "examples" / "batch_extraction" / "texts").glob("*.txt"))
        assert sorted(r["file"] for r in recs) == texts
        for rec in recs:
            jsonschema.validate(rec["person"], PERSON)
    finally:
        s.stop()


# The four examples below share one server (with an API key, which the
# scripts take from --api-key or OPENAI_API_KEY) and find its model through
# /v1/models.

@pytest.fixture(scope="module")
def examples_server(tmp_path_factory):
    s = Server("--data-dir", str(tmp_path_factory.mktemp("data")))
    yield s
    s.stop()


def run_example(server, *argv, env=None):
    if argv[0].endswith(".py"):
        cmd = [sys.executable, str(ROOT / "examples" / argv[0]), "--base-url", server.url + "/v1",
               "--api-key", server.api_key, *argv[1:]]
    else:
        cmd = ["bash", str(ROOT / "examples" / argv[0]), *argv[1:]]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    assert r.returncode == 0, f"exit {r.returncode}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
    return r.stdout


def last_json(out):
    """The indented JSON object an example prints last."""
    return json.loads(out[out.rindex("\n{\n") + 1:out.rindex("\n}") + 2])


def test_curl_example(examples_server):
    """examples/curl/chat.sh: json_schema (whole and streamed), regex, choice, and their other spellings."""
    out = run_example(examples_server, "curl/chat.sh",
                      env={"BASE_URL": examples_server.url + "/v1", "OPENAI_API_KEY": examples_server.api_key})
    assert "model: smol" in out and "data: [DONE]" in out
    assert len(re.findall(r"^ok: ", out, re.M)) == 8, out  # 4 requests, then 4 other spellings
    assert out.rstrip().endswith("all answers fit their constraints"), out


def test_python_parse_example(examples_server):
    """examples/python_parse/parse.py: parse() with nested Pydantic models, an Enum, Optionals and a list."""
    out = run_example(examples_server, "python_parse/parse.py")
    spec = importlib.util.spec_from_file_location("parse_example", ROOT / "examples" / "python_parse" / "parse.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert "parsed:  Event(" in out
    mod.Event.model_validate(last_json(out))


def test_agent_tools_example(examples_server):
    """examples/agent_tools/agent.py: required, named and auto tool choice over three turns,
    every call run and its result sent back."""
    out = run_example(examples_server, "agent_tools/agent.py")
    calls = re.findall(r"^  call  call_\S+ (\w+)\(", out, re.M)
    assert len(calls) >= 2 and "add" in calls, out  # turn 1 required, turn 2 named add
    assert out.count("  assistant: ") == 3 and "final answer:" in out, out


def test_extraction_example(examples_server):
    """examples/extraction/extract.py: schemas/invoice.json as response_format, checked with jsonschema."""
    out = run_example(examples_server, "extraction/extract.py")
    schema = json.loads((ROOT / "schemas" / "invoice.json").read_text())
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER) \
        .validate(last_json(out))
    assert "valid under invoice.json" in out
