#!/usr/bin/env python3
"""Turn a folder of short texts into a JSONL of validated records, with a
batch job on a sieve server through the `openai` SDK.

    python extract.py --base-url http://127.0.0.1:8000/v1 [--model NAME] [--texts texts] [--out people.jsonl]

Each text becomes one line of a batch input file (a chat completion whose
response_format is the Person schema below), uploaded with
files.create(purpose="batch"); batches.create runs it; the script polls the
batch, downloads its output file and writes one record per text,
{"file", "person"}, each checked against the schema with `jsonschema`
(sieve guarantees it; the check shows it). Requests that failed are
reported from the error file."""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import jsonschema
from openai import OpenAI

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "born": {"type": "integer", "minimum": 1000, "maximum": 2100},
        "city": {"type": "string", "maxLength": 40},
    },
    "required": ["name", "born", "city"],
    "additionalProperties": False,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"))
    ap.add_argument("--model", help="default: the server's model")
    ap.add_argument("--texts", default=Path(__file__).parent / "texts", type=Path)
    ap.add_argument("--out", default="people.jsonl", type=Path)
    ap.add_argument("--timeout", default=600, type=float, help="seconds to wait for the batch")
    a = ap.parse_args()

    client = OpenAI(base_url=a.base_url, api_key=a.api_key)
    model = a.model or client.models.list().data[0].id
    files = sorted(a.texts.glob("*.txt"))
    lines = []
    for f in files:
        lines.append(json.dumps({
            "custom_id": f.name, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": model, "max_tokens": 80, "temperature": 0,
                     "messages": [{"role": "system", "content": "Extract the person as JSON."},
                                  {"role": "user", "content": f.read_text().strip()}],
                     "response_format": {"type": "json_schema",
                                         "json_schema": {"name": "person", "schema": PERSON, "strict": True}}}}))
    upload = client.files.create(file=("people_requests.jsonl", ("\n".join(lines) + "\n").encode()), purpose="batch")
    batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions",
                                  completion_window="24h", metadata={"job": "batch_extraction example"})
    print(f"batch {batch.id}: {len(lines)} requests", file=sys.stderr)
    deadline = time.monotonic() + a.timeout
    while batch.status not in ("completed", "failed", "expired", "cancelled"):
        if time.monotonic() > deadline:
            sys.exit(f"the batch is still {batch.status} after {a.timeout:.0f} s")
        time.sleep(1)
        batch = client.batches.retrieve(batch.id)
        print(f"  {batch.status}: {batch.request_counts.completed}/{batch.request_counts.total}", file=sys.stderr)
    if batch.status != "completed":
        sys.exit(f"the batch ended {batch.status}: {batch.errors}")

    records = 0
    with open(a.out, "w") as out:
        for raw in client.files.content(batch.output_file_id).read().decode().splitlines():
            line = json.loads(raw)
            person = json.loads(line["response"]["body"]["choices"][0]["message"]["content"])
            jsonschema.validate(person, PERSON)
            out.write(json.dumps({"file": line["custom_id"], "person": person}) + "\n")
            records += 1
    if batch.error_file_id:
        for raw in client.files.content(batch.error_file_id).read().decode().splitlines():
            line = json.loads(raw)
            print(f"  {line['custom_id']} failed: {line['error'] or line['response']['body']}", file=sys.stderr)
    print(f"{records} records in {a.out} ({batch.usage.output_tokens} tokens generated)", file=sys.stderr)
    if records != len(files):
        sys.exit(1)


if __name__ == "__main__":
    main()
