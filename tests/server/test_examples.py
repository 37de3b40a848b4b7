"""The examples run against a live server (examples/)."""
import json
import subprocess
import sys
from pathlib import Path

import jsonschema

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
