#!/usr/bin/env python3
"""Structured extraction: an invoice email in, a JSON record that fits
schemas/invoice.json out, through the openai SDK on a sieve server.

    python extract.py [--base-url http://127.0.0.1:8000/v1] [--model NAME] [--api-key KEY]
                      [--schema ../../schemas/invoice.json] [--text invoice_email.txt]

The schema file goes in unchanged as a json_schema response_format: an
invoice id with a pattern (^INV-[0-9]{6}$), a date (format: date), a
currency enum, 1 to 4 line items (integer quantities, prices that are
multiples of 0.01) and an optional paid flag. sieve constrains the answer to
the schema; the script checks it again with jsonschema (formats included),
prints it and exits non-zero if it does not validate."""
import argparse
import json
import os
import sys
from pathlib import Path

import jsonschema
from openai import OpenAI

HERE = Path(__file__).resolve().parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"))
    ap.add_argument("--model", help="default: the server's model")
    ap.add_argument("--schema", type=Path, default=HERE.parents[1] / "schemas" / "invoice.json")
    ap.add_argument("--text", type=Path, default=HERE / "invoice_email.txt")
    a = ap.parse_args()

    schema = json.loads(a.schema.read_text())
    text = a.text.read_text().strip()
    client = OpenAI(base_url=a.base_url, api_key=a.api_key, max_retries=0)
    model = a.model or client.models.list().data[0].id
    r = client.chat.completions.create(
        model=model, max_tokens=200, temperature=0,
        messages=[{"role": "system",
                   "content": "Extract the invoice from the email as JSON: its id, date, currency, "
                              "line items (sku, qty, unit_price) and whether it is paid."},
                  {"role": "user", "content": text}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": a.schema.stem, "schema": schema, "strict": True}})
    c = r.choices[0]
    print(f"finish_reason: {c.finish_reason}, {r.usage.prompt_tokens} prompt + "
          f"{r.usage.completion_tokens} completion tokens")
    try:
        record = json.loads(c.message.content)
    except (TypeError, json.JSONDecodeError) as e:
        sys.exit(f"the answer is not JSON ({e}): {c.message.content!r}")
    print(json.dumps(record, indent=2, ensure_ascii=False))
    validator = jsonschema.validators.validator_for(schema)
    errors = list(validator(schema, format_checker=validator.FORMAT_CHECKER).iter_errors(record))
    for e in errors:
        print(f"invalid at /{'/'.join(map(str, e.absolute_path))}: {e.message}", file=sys.stderr)
    if errors:
        sys.exit(1)
    total = sum(line["qty"] * line["unit_price"] for line in record["lines"])
    print(f"valid under {a.schema.name}: {len(record['lines'])} line(s), total {total:.2f} {record['currency']}")


if __name__ == "__main__":
    main()
