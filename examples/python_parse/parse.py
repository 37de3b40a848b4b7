#!/usr/bin/env python3
"""Typed answers with the openai SDK's chat.completions.parse() and Pydantic
models, on a sieve server.

    python parse.py [--base-url http://127.0.0.1:8000/v1] [--model NAME] [--api-key KEY]

The response_format is a Pydantic model: an event with a nested venue, an
Enum, Optional fields and a list of attendees (nested models too). The SDK
turns it into a strict JSON Schema ($defs and $refs for the nested models and
the Enum, anyOf [..., null] for the Optionals, every field required); sieve constrains the generation to it, so
message.parsed is always an Event (the schema's bounds, such as max_length,
are enforced too, and max_tokens never cuts the JSON: sieve closes it in
time). The script prints the parsed event and exits non-zero if anything is
off."""
import argparse
import json
import os
import sys
from enum import Enum
from typing import Optional

from openai import OpenAI
from pydantic import BaseModel, Field


class Role(str, Enum):
    organizer = "organizer"
    speaker = "speaker"
    guest = "guest"


class Attendee(BaseModel):
    name: str = Field(max_length=30)
    role: Role
    email: Optional[str] = Field(default=None, max_length=40)   # or null


class Venue(BaseModel):
    name: str = Field(max_length=40)
    city: str = Field(max_length=30)


class Event(BaseModel):
    title: str = Field(max_length=60)
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")   # ISO date
    venue: Venue
    online: bool
    capacity: Optional[int] = Field(default=None, ge=1, le=10000)   # or null
    attendees: list[Attendee] = Field(min_length=1, max_length=3)


TEXT = ("PyData Lisbon meetup on 2025-03-14 at the Impact Hub in Lisbon, in person. "
        "Ana Silva organizes; Tom Becker (tom@example.org) gives a talk on Polars; "
        "about 80 seats.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"))
    ap.add_argument("--model", help="default: the server's model")
    a = ap.parse_args()

    client = OpenAI(base_url=a.base_url, api_key=a.api_key, max_retries=0)
    model = a.model or client.models.list().data[0].id
    r = client.chat.completions.parse(
        model=model, max_tokens=200, temperature=0,
        messages=[{"role": "system", "content": "Extract the event as JSON."},
                  {"role": "user", "content": TEXT}],
        response_format=Event)
    choice = r.choices[0]
    event = choice.message.parsed
    print(f"finish_reason: {choice.finish_reason}, {r.usage.completion_tokens} tokens")
    print(f"content: {choice.message.content}")
    print(f"parsed:  {event!r}")
    if not isinstance(event, Event):
        sys.exit(f"message.parsed is {type(event).__name__}, not Event")
    Event.model_validate_json(choice.message.content)   # the text itself, checked again
    print(json.dumps(event.model_dump(mode="json"), indent=2))


if __name__ == "__main__":
    main()
