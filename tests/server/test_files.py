"""The Files API (`/v1/files`, src/server/files.c over src/batch/store.h)
through the real `openai` SDK: upload, list, retrieve, content, delete;
durable across a restart; bounded uploads; a data directory that cannot be
used is a 503 for the files only."""
import json
import os

import httpx2 as httpx
import openai
import pytest

from live import Server


@pytest.fixture()
def files_server(tmp_path):
    s = Server("--data-dir", str(tmp_path / "data"), "--max-file-bytes", "100000")
    yield s, tmp_path / "data"
    s.stop()


def lines_file(tmp_path, n=3):
    p = tmp_path / "requests.jsonl"
    p.write_text("".join(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
                                     "body": {"model": "smol", "messages": [{"role": "user", "content": "Hi"}]}}) + "\n"
                         for i in range(n)))
    return p


def test_sdk_upload_list_retrieve_content_delete(files_server, tmp_path):
    s, data = files_server
    c = s.client()
    p = lines_file(tmp_path)
    with open(p, "rb") as f:
        up = c.files.create(file=f, purpose="batch")
    assert up.id.startswith("file-") and up.object == "file" and up.purpose == "batch"
    assert up.bytes == p.stat().st_size and up.filename == "requests.jsonl" and up.status == "processed"
    got = c.files.retrieve(up.id)
    assert got.id == up.id and got.bytes == up.bytes and got.created_at == up.created_at
    assert c.files.content(up.id).read() == p.read_bytes()
    # a second file, of another purpose: newest first, filtered by purpose
    with open(p, "rb") as f:
        other = c.files.create(file=("notes.txt", f.read()[:10]), purpose="user_data")
    ids = [f.id for f in c.files.list()]
    assert ids[:2] == [other.id, up.id]
    assert [f.id for f in c.files.list(purpose="batch")] == [up.id]
    page = httpx.get(s.url + "/v1/files?limit=1", headers=s.headers()).json()
    assert page["has_more"] and page["first_id"] == other.id
    page2 = httpx.get(s.url + f"/v1/files?limit=1&after={other.id}", headers=s.headers()).json()
    assert [f["id"] for f in page2["data"]] == [up.id] and not page2["has_more"]
    # delete: gone from the list, the content and the disk
    d = c.files.delete(up.id)
    assert d.deleted and d.id == up.id
    with pytest.raises(openai.NotFoundError):
        c.files.retrieve(up.id)
    with pytest.raises(openai.NotFoundError):
        c.files.content(up.id)
    with pytest.raises(openai.NotFoundError):
        c.files.delete(up.id)
    assert up.id not in [f.id for f in c.files.list()]
    assert not (data / "files" / up.id).exists()


def test_files_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    p = lines_file(tmp_path, 50)
    s = Server("--data-dir", str(data))
    try:
        with open(p, "rb") as f:
            fid = s.client().files.create(file=f, purpose="batch").id
    finally:
        s.proc.kill()  # no drain, no clean close
        s.proc.wait()
    # a write a crash cut short, and bytes without a row: swept at the next open
    (data / "files" / "file-00000000000000000000dead.tmp").write_bytes(b"partial")
    (data / "files" / "file-0000000000000000000000ff").write_bytes(b"orphan")
    s = Server("--data-dir", str(data))
    try:
        c = s.client()
        assert c.files.content(fid).read() == p.read_bytes()
        assert [f.id for f in c.files.list()] == [fid]
        assert sorted(os.listdir(data / "files")) == [fid]
    finally:
        s.stop()


def test_upload_errors(files_server, tmp_path):
    s, _ = files_server
    c = s.client()
    with pytest.raises(openai.BadRequestError) as e:
        c.files.create(file=("x.jsonl", b"{}\n"), purpose="fine-tune")
    assert e.value.body["param"] == "purpose"
    with pytest.raises(openai.APIStatusError) as e:
        c.files.create(file=("big.jsonl", b"x" * 100001), purpose="batch")
    assert e.value.status_code == 413
    h = s.headers()
    r = httpx.post(s.url + "/v1/files", headers=h, files={"purpose": (None, "batch")})
    assert r.status_code == 400 and r.json()["error"]["param"] == "file"
    r = httpx.post(s.url + "/v1/files", headers=dict(h, **{"Content-Type": "application/json"}), content=b"{}")
    assert r.status_code == 400 and "multipart" in r.json()["error"]["message"]
    r = httpx.post(s.url + "/v1/files", headers=dict(h, **{"Content-Type": "multipart/form-data; boundary=zz"}),
                   content=b"--zz\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc")
    assert r.status_code == 400 and "closing boundary" in r.json()["error"]["message"]
    assert httpx.get(s.url + "/v1/files/file-../etc", headers=h).status_code == 404
    assert httpx.get(s.url + "/v1/files", headers={}).status_code == 401
    assert httpx.put(s.url + "/v1/files", headers=h).status_code == 405


def test_unusable_data_dir_is_a_503_for_files_only(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    s = Server("--data-dir", str(blocker / "data"))  # cannot be made, even by root
    try:
        c = s.client()
        with pytest.raises(openai.APIStatusError) as e:
            c.files.list()
        assert e.value.status_code == 503 and "data directory" in e.value.message
        r = c.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
        assert r.choices[0].message.content is not None
    finally:
        s.stop()
