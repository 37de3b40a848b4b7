"""`sieve batch`: OpenAI batch request lines through the model (src/cli/cmd_batch.c).

Checked independently: every answer against its schema with Python
`jsonschema`, regexes with `re.fullmatch`, the output's shape against
OpenAI's batch output lines, each custom_id exactly once after a SIGKILL
and a resume, and the bad-input report line by line."""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest

from live import MODEL, sieve_bin

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
CITY = {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 16}, "country": {"enum": ["FR", "DE", "IT"]}},
        "required": ["city", "country"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {
    "name": "add", "description": "Add two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"], "additionalProperties": False}}}]
REGEX = "[A-Z][a-z]{2,8}-[0-9]{2}"


def chat(cid, content, max_tokens=40, **extra):
    body = {"model": "smol", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "temperature": 0}
    body.update(extra)
    return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}


def schema_fmt(s):
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": s, "strict": True}}


def write_lines(path, lines):
    path.write_text("".join(json.dumps(l) + "\n" for l in lines))


def run_batch(inp, out, *args, timeout=600):
    cmd = [sieve_bin(), "batch", "-m", str(MODEL), "-i", str(inp), "-o", str(out), "--threads", "2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def read_out(path):
    text = Path(path).read_text() if Path(path).exists() else ""
    assert not text or text.endswith("\n")
    return [json.loads(l) for l in text.splitlines()]


def check_answer(line, req):
    """The output line's shape, and its content against the request's constraint."""
    assert set(line) == {"id", "custom_id", "response", "error"}
    assert line["id"].startswith("batch_req_") and line["error"] is None
    resp = line["response"]
    assert set(resp) == {"status_code", "request_id", "body"}
    assert resp["status_code"] == 200, resp
    body = resp["body"]
    assert resp["request_id"] == body["id"]
    assert body["usage"]["completion_tokens"] >= 1
    if req["url"] == "/v1/completions":
        assert body["object"] == "text_completion" and isinstance(body["choices"][0]["text"], str)
        return
    msg = body["choices"][0]["message"]
    b = req["body"]
    if "tools" in b:
        (call,) = msg["tool_calls"]
        assert call["function"]["name"] == "add"
        jsonschema.validate(json.loads(call["function"]["arguments"]), TOOLS[0]["function"]["parameters"])
    elif "response_format" in b:
        jsonschema.validate(json.loads(msg["content"]), b["response_format"]["json_schema"]["schema"])
    elif "regex" in b:
        assert re.fullmatch(b["regex"], msg["content"]), msg["content"]


def mixed_lines(n):
    lines = []
    for i in range(n):
        k = i % 5
        if k == 0:
            lines.append(chat(f"p{i}", f"Describe person number {i}.", response_format=schema_fmt(PERSON)))
        elif k == 1:
            lines.append(chat(f"c{i}", f"Name a city ({i}).", response_format=schema_fmt(CITY)))
        elif k == 2:
            lines.append(chat(f"t{i}", f"Add {i} and 3.", tools=TOOLS, tool_choice="required"))
        elif k == 3:
            lines.append(chat(f"r{i}", f"A code, please ({i}).", regex=REGEX))
        else:
            lines.append({"custom_id": f"x{i}", "method": "POST", "url": "/v1/completions",
                          "body": {"model": "smol", "prompt": f"Item {i}:", "max_tokens": 12, "temperature": 0}})
    return lines


def test_batch_runs_every_line_once_and_valid(tmp_path):
    lines = mixed_lines(15)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_lines(inp, lines)
    r = run_batch(inp, out)
    assert r.returncode == 0, r.stderr
    got = read_out(out)
    by_id = {l["custom_id"]: l for l in got}
    assert len(got) == len(lines) == len(by_id)
    for req in lines:
        line = by_id[req["custom_id"]]
        check_answer(line, req)
    # One compile per distinct constraint: two schemas, the tool list, the regex.
    m = re.search(r"constraints: (\d+) compiled, (\d+) found compiled", r.stderr)
    assert m and int(m.group(1)) == 4 and int(m.group(2)) >= 8, r.stderr
    # Every constrained answer was checked again by the independent validator.
    assert "checked again: 12 valid, 0 failed, 0 unchecked" in r.stderr, r.stderr
    assert "15 of 15 requests done" in r.stderr
    # The output is not overwritten without --resume.
    r2 = run_batch(inp, out)
    assert r2.returncode == 64 and "--resume" in r2.stderr
    assert len(read_out(out)) == 15
    # A resume with nothing left does nothing.
    r3 = run_batch(inp, out, "--resume")
    assert r3.returncode == 0 and "15 of 15 requests already done" in r3.stderr, r3.stderr
    assert len(read_out(out)) == 15


def test_bad_input_is_refused_line_by_line(tmp_path):
    good = chat("a", "Hi.", response_format=schema_fmt(PERSON))
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({"method": "POST", "url": "/v1/chat/completions", "body": good["body"]}),
        json.dumps(dict(good, custom_id="a")),
        json.dumps(dict(good, custom_id="b", method="GET")),
        json.dumps(dict(good, custom_id="c", url="/v1/embeddings")),
        json.dumps(dict(good, custom_id="d", body=[1])),
        json.dumps(dict(good, custom_id="e", body=dict(good["body"], model="other"))),
        json.dumps(dict(good, custom_id="f", body=dict(good["body"], temperature=-3))),
        json.dumps(dict(good, custom_id="g", body=dict(good["body"], response_format=schema_fmt(
            {"type": "string", "pattern": "(a"})))),
        json.dumps(dict(good, custom_id="h", body=dict(good["body"], stream=True))),
        "",
        json.dumps(chat("i", "Fine.")),
    ]
    inp, out, errs = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "errors.json"
    inp.write_text("\n".join(lines) + "\n")
    r = run_batch(inp, out, "--input-errors", str(errs))
    assert r.returncode == 65, r.stderr
    assert "10 bad lines; nothing was run" in r.stderr
    report = json.loads(errs.read_text())
    assert [(e["line"], e["code"]) for e in report] == [
        (2, "invalid_json"), (3, "missing_custom_id"), (4, "duplicate_custom_id"), (5, "invalid_method"),
        (6, "invalid_url"), (7, "invalid_body"), (8, "mismatched_model"), (9, "invalid_request"),
        (10, "invalid_constraint"), (11, "invalid_request")]
    assert report[6]["param"] == "body.model" and report[7]["param"] == "temperature"
    assert report[8]["param"] == "response_format" and "pattern" in report[8]["message"]
    assert not out.exists() or out.read_text() == ""


def test_resume_after_sigkill_loses_and_repeats_nothing(tmp_path):
    # enough requests that a fast machine is still running them when the test kills it
    lines = [chat(f"k{i}", f"Describe person {i}.", max_tokens=30, response_format=schema_fmt(PERSON))
             for i in range(64)]
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_lines(inp, lines)
    cmd = [sieve_bin(), "batch", "-m", str(MODEL), "-i", str(inp), "-o", str(out), "--threads", "2",
           "--max-num-seqs", "4"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and p.poll() is None:
            if out.exists() and out.read_text().count("\n") >= 6:
                break
            time.sleep(0.05)
        assert p.poll() is None, "the batch finished before it could be killed"
        p.kill()
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
    done_before = read_out(out)
    assert 6 <= len(done_before) < len(lines)
    # A crash in the middle of a write leaves a cut line: --resume drops it.
    with open(out, "a") as f:
        f.write('{"id": "batch_req_cut", "custom_id": "k2')
    r = run_batch(inp, out, "--resume", "--max-num-seqs", "4")
    assert r.returncode == 0, r.stderr
    assert f"resuming: {len(done_before)} of {len(lines)} requests already done" in r.stderr
    got = read_out(out)
    ids = [l["custom_id"] for l in got]
    assert sorted(ids) == sorted(l["custom_id"] for l in lines), "each line exactly once"
    assert got[:len(done_before)] == done_before
    for line in got:
        check_answer(line, lines[int(line["custom_id"][1:])])


def test_sigint_stops_cleanly_and_resume_finishes(tmp_path):
    lines = [chat(f"s{i}", f"Name a city ({i}).", max_tokens=30, response_format=schema_fmt(CITY)) for i in range(60)]
    # One line fails at run time (its prompt is longer than the context):
    # its answer, a 400, goes to the errors file.
    lines.append(chat("long", "word " * 400, max_tokens=8))
    inp, out, errs = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    write_lines(inp, lines)
    extra = ["--errors", str(errs), "--max-model-len", "256", "--max-num-seqs", "4"]
    cmd = [sieve_bin(), "batch", "-m", str(MODEL), "-i", str(inp), "-o", str(out), "--threads", "2", *extra]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and p.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 3:
            break
        time.sleep(0.05)
    assert p.poll() is None
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, stderr = p.communicate(timeout=60)
    assert p.returncode == 130, stderr
    assert time.monotonic() - t0 < 20
    assert "run again with --resume" in stderr
    first = read_out(out) + read_out(errs)
    assert len(first) < len(lines)
    r = run_batch(inp, out, "--resume", *extra)
    assert r.returncode == 0, r.stderr
    ok, bad = read_out(out), read_out(errs)
    assert sorted(l["custom_id"] for l in ok + bad) == sorted(l["custom_id"] for l in lines)
    (failed,) = bad
    assert failed["custom_id"] == "long" and failed["response"]["status_code"] == 400
    assert failed["response"]["body"]["error"]["type"] == "invalid_request_error"
    for line in ok:
        check_answer(line, lines[int(line["custom_id"][1:])])


def test_an_answer_that_misses_its_constraint_is_an_error_line(tmp_path):
    """The check after generation (src/api/schema_check.h): an answer
    spoiled as a compiler bug would spoil it (a test hook) becomes an error
    line with code validation_failed, in the errors file, never a silently
    invalid line; the others are untouched."""
    lines = mixed_lines(5)
    inp, out, errs = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    write_lines(inp, lines)
    for spoiled in ("p0", "t2"):
        for f in (out, errs):
            f.unlink(missing_ok=True)
        env = dict(os.environ, SIEVE_TEST_BATCH_SPOIL=spoiled)
        cmd = [sieve_bin(), "batch", "-m", str(MODEL), "-i", str(inp), "-o", str(out), "--errors", str(errs)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0, r.stderr
        (bad,) = read_out(errs)
        assert bad["custom_id"] == spoiled and bad["response"]["status_code"] == 200
        assert bad["error"]["code"] == "validation_failed", bad["error"]
        assert "3 valid, 1 failed" in r.stderr and "a bug in sieve" in r.stderr, r.stderr
        good = read_out(out)
        assert len(good) == 4
        for line in good:
            check_answer(line, next(l for l in lines if l["custom_id"] == line["custom_id"]))


def test_batch_usage_errors(tmp_path):
    r = subprocess.run([sieve_bin(), "batch", "-m", str(MODEL), "-i", str(tmp_path / "x")], capture_output=True,
                       text=True)
    assert r.returncode == 64 and "-o OUTPUT" in r.stderr
    r = subprocess.run([sieve_bin(), "serve", "-m", str(MODEL), "--resume"], capture_output=True, text=True)
    assert r.returncode == 64 and "unknown option '--resume'" in r.stderr
    r = subprocess.run([sieve_bin(), "batch", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--resume" in r.stdout
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    r = run_batch(empty, tmp_path / "o.jsonl")
    assert r.returncode == 65 and "holds no request" in r.stderr


def test_priority_header(server):
    """X-Sieve-Priority: batch runs like any request (at batch priority:
    src/engine/engine.h, "Priorities"); a value other than online or batch
    is a 400."""
    body = {"model": "smol", "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 8, "temperature": 0}
    import httpx2 as httpx

    def post(prio):
        return httpx.post(server.url + "/v1/chat/completions", json=body,
                          headers=dict(server.headers(), **{"X-Sieve-Priority": prio}), timeout=300)

    before = {k: server.metric(k) or 0 for k in ("time_to_first_token_seconds_count",
                                                   "batch_time_to_first_token_seconds_count",
                                                   "batch_e2e_request_latency_seconds_count")}
    a, b = post("batch"), post("online")
    assert a.status_code == 200 and b.status_code == 200, (a.text, b.text)
    # batch-priority requests have their own latency metrics
    after = {k: server.metric(k) or 0 for k in before}
    assert {k: after[k] - before[k] for k in before} == {"time_to_first_token_seconds_count": 1,
                                                         "batch_time_to_first_token_seconds_count": 1,
                                                         "batch_e2e_request_latency_seconds_count": 1}
    assert server.metric("batch_num_requests_running") == 0 and server.metric("batch_num_requests_waiting") == 0
    assert a.json()["choices"][0]["message"] == b.json()["choices"][0]["message"]
    r = post("urgent")
    assert r.status_code == 400 and "X-Sieve-Priority" in r.json()["error"]["message"]


def test_auto_tool_calls_are_checked_again(tmp_path):
    """tool_choice auto in a batch: a choice's calls are checked against the
    call list they were constrained to (src/batch/output.c); a text answer
    passes, and calls spoiled as a compiler bug would spoil them (a tool
    that does not exist) are a validation_failed line."""
    shots = []
    for i, (a, b) in enumerate([(2, 5), (7, 1), (4, 4)]):
        shots.append({"role": "user", "content": f"Add {a} and {b}."})
        shots.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{i}", "type": "function",
            "function": {"name": "add", "arguments": json.dumps({"a": a, "b": b})}}]})
    calls = chat("a0", "", tools=TOOLS, tool_choice="auto")
    calls["body"]["messages"] = shots + [{"role": "user", "content": "Add 6 and 9."}]
    text = chat("a1", "Say hello.", tools=TOOLS, tool_choice="auto", max_tokens=12)
    inp, out, errs = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    write_lines(inp, [calls, text])
    r = run_batch(inp, out, "--errors", str(errs))
    assert r.returncode == 0, r.stderr
    got = {l["custom_id"]: l for l in read_out(out)}
    assert set(got) == {"a0", "a1"} and read_out(errs) == []
    (call,) = got["a0"]["response"]["body"]["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "add"
    jsonschema.validate(json.loads(call["function"]["arguments"]), TOOLS[0]["function"]["parameters"])
    for f in (out, errs):
        f.unlink()
    env = dict(os.environ, SIEVE_TEST_BATCH_SPOIL="a0")
    cmd = [sieve_bin(), "batch", "-m", str(MODEL), "-i", str(inp), "-o", str(out), "--errors", str(errs)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    (bad,) = read_out(errs)
    assert bad["custom_id"] == "a0" and bad["error"]["code"] == "validation_failed", bad
    assert [l["custom_id"] for l in read_out(out)] == ["a1"]
