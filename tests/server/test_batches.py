"""The Batch API (`/v1/batches`, src/server/batches.c) through the real
`openai` SDK: upload, create, poll, download and check every line; cancel
mid-batch; a bad input file fails with per-line errors; an expired window;
`kill -9` mid-batch and a restart lose and repeat nothing."""
import json
import time

import jsonschema
import openai
import pytest

from live import Server

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


def line(i, max_tokens=40):
    return {"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "smol", "max_tokens": max_tokens, "temperature": 0,
                     "messages": [{"role": "user", "content": f"Describe person number {i}."}],
                     "response_format": {"type": "json_schema",
                                         "json_schema": {"name": "p", "schema": PERSON, "strict": True}}}}


def upload(c, tmp_path, lines, name="in.jsonl"):
    p = tmp_path / name
    p.write_text("".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines))
    with open(p, "rb") as f:
        return c.files.create(file=f, purpose="batch").id


def wait(c, bid, until, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        b = c.batches.retrieve(bid)
        if until(b):
            return b
        time.sleep(0.2)
    raise AssertionError(f"batch {bid} stuck at {b.status} {b.request_counts}")


def read_lines(c, fid):
    if fid is None:
        return []
    return [json.loads(l) for l in c.files.content(fid).read().decode().splitlines()]


def check_ok(l):
    assert l["error"] is None and l["response"]["status_code"] == 200, l
    body = l["response"]["body"]
    jsonschema.validate(json.loads(body["choices"][0]["message"]["content"]), PERSON)


@pytest.fixture()
def srv(tmp_path):
    s = Server("--data-dir", str(tmp_path / "data"))
    yield s
    s.stop()


def test_sdk_batch_end_to_end(srv, tmp_path):
    c = srv.client()
    fid = upload(c, tmp_path, [line(i) for i in range(12)])
    b = c.batches.create(input_file_id=fid, endpoint="/v1/chat/completions", completion_window="24h",
                         metadata={"job": "people"})
    assert b.status == "validating" and b.object == "batch" and b.metadata == {"job": "people"}
    assert b.expires_at == b.created_at + 24 * 3600
    done = wait(c, b.id, lambda x: x.status in ("completed", "failed"))
    assert done.status == "completed", done
    assert done.request_counts.total == 12 and done.request_counts.completed == 12 and done.request_counts.failed == 0
    assert done.in_progress_at and done.finalizing_at and done.completed_at and done.error_file_id is None
    assert done.usage.output_tokens > 0 and done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens
    out = read_lines(c, done.output_file_id)
    assert sorted(l["custom_id"] for l in out) == sorted(f"req-{i}" for i in range(12))
    for l in out:
        check_ok(l)
    f = c.files.retrieve(done.output_file_id)
    assert f.purpose == "batch_output"
    assert [x.id for x in c.batches.list()] == [b.id]
    # one compile for the 12 lines (the check of the file compiles it)
    assert srv.metric("constraint_cache_misses_total") == 1
    assert srv.metric("batch_requests_total", status="completed") == 12
    assert srv.metric("batches", status="completed") == 1
    assert srv.metric("batch_validation_failed_total") == 0
    with pytest.raises(openai.BadRequestError):
        c.batches.cancel(b.id)


def test_bad_input_fails_with_line_errors(srv, tmp_path):
    c = srv.client()
    bad = [line(0), "{not json", dict(line(2), custom_id="req-0"), dict(line(3), url="/v1/completions"),
           dict(line(4), body=dict(line(4)["body"], response_format={"type": "json_schema", "json_schema": {
               "name": "x", "schema": {"type": "string", "pattern": "(a"}}}))]
    fid = upload(c, tmp_path, bad)
    b = c.batches.create(input_file_id=fid, endpoint="/v1/chat/completions", completion_window="24h")
    done = wait(c, b.id, lambda x: x.status not in ("validating", "in_progress"))
    assert done.status == "failed" and done.failed_at
    assert [(e.line, e.code) for e in done.errors.data] == [
        (2, "invalid_json"), (3, "duplicate_custom_id"), (4, "invalid_url"), (5, "invalid_constraint")]
    # requests that the server refuses outright
    with pytest.raises(openai.BadRequestError):
        c.batches.create(input_file_id="file-0000", endpoint="/v1/chat/completions", completion_window="24h")
    with pytest.raises(openai.BadRequestError):
        c.batches.create(input_file_id=fid, endpoint="/v1/embeddings", completion_window="24h")
    with pytest.raises(openai.BadRequestError):
        c.batches.create(input_file_id=fid, endpoint="/v1/chat/completions", completion_window="soon")
    with pytest.raises(openai.NotFoundError):
        c.batches.retrieve("batch_nope")


def test_cancel_mid_batch(srv, tmp_path):
    c = srv.client()
    n = 400  # more than any machine finishes between the poll and the cancel
    fid = upload(c, tmp_path, [line(i, 60) for i in range(n)])
    b = c.batches.create(input_file_id=fid, endpoint="/v1/chat/completions", completion_window="24h")
    wait(c, b.id, lambda x: x.status == "in_progress" and x.request_counts.completed >= 2)
    x = c.batches.cancel(b.id)
    assert x.status in ("cancelling", "cancelled") and x.cancelling_at
    done = wait(c, b.id, lambda x: x.status == "cancelled")
    assert done.cancelled_at and done.request_counts.completed < n
    out = read_lines(c, done.output_file_id)
    assert len(out) == done.request_counts.completed and len({l["custom_id"] for l in out}) == len(out)
    for l in out:
        check_ok(l)


def test_expired_window(srv, tmp_path):
    # Far more work than any machine does in the 3 s window (60,000 tokens;
    # 80 requests used to be enough, until the CPU backend finished them in 3 s).
    c = srv.client()
    n = 1000
    fid = upload(c, tmp_path, [line(i, 60) for i in range(n)])
    b = c.batches.create(input_file_id=fid, endpoint="/v1/chat/completions", completion_window="3s")
    done = wait(c, b.id, lambda x: x.status in ("expired", "completed", "failed"))
    assert done.status == "expired" and done.expired_at, done
    ok, errs = read_lines(c, done.output_file_id), read_lines(c, done.error_file_id)
    assert sorted(l["custom_id"] for l in ok + errs) == sorted(f"req-{i}" for i in range(n))
    assert errs and all(l["response"] is None and l["error"]["code"] == "batch_expired" for l in errs)
    assert done.request_counts.completed == len(ok) and done.request_counts.failed == len(errs)


def test_kill9_and_restart_resume(tmp_path):
    data = tmp_path / "data"
    s = Server("--data-dir", str(data))
    c = s.client()
    fid = upload(c, tmp_path, [line(i, 40) for i in range(30)])
    b = c.batches.create(input_file_id=fid, endpoint="/v1/chat/completions", completion_window="24h")
    wait(c, b.id, lambda x: x.request_counts.completed >= 4)
    s.proc.kill()
    s.proc.wait()
    s = Server("--data-dir", str(data))
    try:
        c = s.client()
        done = wait(c, b.id, lambda x: x.status in ("completed", "failed"))
        assert done.status == "completed", done
        out = read_lines(c, done.output_file_id)
        ids = [l["custom_id"] for l in out]
        assert sorted(ids) == sorted(f"req-{i}" for i in range(30)), "no line lost or written twice"
        assert done.request_counts.completed == 30
        for l in out:
            check_ok(l)
    finally:
        s.stop()


def test_unwritable_output_fails_the_batch_not_the_server(srv, tmp_path):
    """The batch's output directory cannot be made (a file stands where it
    goes: ENOTDIR, even for root): the batch fails with the reason, and the
    server goes on serving."""
    c = srv.client()
    fid = upload(c, tmp_path, [line(i) for i in range(3)])
    (tmp_path / "data" / "batches").write_text("in the way")
    b = c.batches.create(input_file_id=fid, endpoint="/v1/chat/completions", completion_window="24h")
    done = wait(c, b.id, lambda x: x.status not in ("validating", "in_progress"))
    assert done.status == "failed" and done.errors.data[0].code == "output_failed", done
    assert "cannot create" in done.errors.data[0].message
    r = c.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
    assert r.choices[0].message.content is not None
    assert srv.metric("batches", status="failed") == 1
