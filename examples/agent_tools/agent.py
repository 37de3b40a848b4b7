#!/usr/bin/env python3
"""A multi-turn agent loop with local Python tools, through the openai SDK on
a sieve server.

    python agent.py [--base-url http://127.0.0.1:8000/v1] [--model NAME] [--api-key KEY]

Three user turns, one conversation. Turn 1 asks with tool_choice="required"
(the model must call one of the tools), turn 2 names the function to call,
turn 3 leaves the choice to the model ("auto": it may call a tool or answer
in text; both are handled). Every call the model makes is checked (a real
tool, arguments that parse as JSON and validate against the tool's
parameters schema, which sieve guarantees), run, and its result goes back as
a "tool" message after the assistant message that holds the calls; then the
model is asked again ("auto", and "none" once the round limit is reached) until
it answers in text. The script prints the conversation and exits non-zero if
a call is not valid."""
import argparse
import json
import os
import sys

import jsonschema
from openai import OpenAI

# ---- the local tools ---------------------------------------------------------

WEATHER = {"Paris": (14, "light rain"), "Tokyo": (22, "sunny"), "Oslo": (-3, "snow")}
FACTS = {"eiffel tower": "The Eiffel Tower is 330 m tall and was finished in 1889.",
         "mount fuji": "Mount Fuji is 3776 m high, the highest mountain in Japan.",
         "python": "Python was first released in 1991 by Guido van Rossum."}


def get_weather(city, unit="celsius"):
    temp, sky = WEATHER.get(city, (18, "cloudy"))  # canned data
    if unit == "fahrenheit":
        temp = round(temp * 9 / 5 + 32)
    return {"city": city, "temperature": temp, "unit": unit, "sky": sky}


def add(a, b):
    return {"sum": a + b}


def lookup_fact(topic):
    return {"topic": topic, "fact": FACTS[topic]}


TOOLS = {
    "get_weather": (get_weather, "The current weather in a city", {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 30},
                       "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city"], "additionalProperties": False}),
    "add": (add, "Add two numbers", {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"], "additionalProperties": False}),
    "lookup_fact": (lookup_fact, "Look up a fact in the knowledge base", {
        "type": "object",
        "properties": {"topic": {"enum": sorted(FACTS)}},
        "required": ["topic"], "additionalProperties": False}),
}
TOOL_DEFS = [{"type": "function", "function": {"name": name, "description": desc, "parameters": params}}
             for name, (_, desc, params) in TOOLS.items()]


def run_call(call):
    """Check one tool call the model made, run it, return its result as text."""
    name = call.function.name
    if name not in TOOLS:
        sys.exit(f"the model called {name!r}, which is not a tool")
    fn, _, params = TOOLS[name]
    try:
        args = json.loads(call.function.arguments)
        jsonschema.validate(args, params)
    except (json.JSONDecodeError, jsonschema.ValidationError) as e:
        sys.exit(f"invalid arguments for {name}: {call.function.arguments!r}: {e}")
    result = json.dumps(fn(**args))
    print(f"  call  {call.id} {name}({call.function.arguments}) -> {result}")
    return result


# ---- the loop ----------------------------------------------------------------

def turn(client, model, messages, user, tool_choice, max_rounds=3):
    """One user turn: ask, run the calls, ask again until the model answers in text."""
    print(f"user ({tool_choice if isinstance(tool_choice, str) else 'named: ' + tool_choice['function']['name']}):"
          f" {user}")
    messages.append({"role": "user", "content": user})
    calls_made = 0
    for rnd in range(max_rounds + 1):
        choice = "none" if rnd == max_rounds else tool_choice if rnd == 0 else "auto"
        r = client.chat.completions.create(model=model, messages=messages, tools=TOOL_DEFS,
                                           tool_choice=choice, max_tokens=60, temperature=0)
        c = r.choices[0]
        msg = c.message
        if not msg.tool_calls:
            if choice == "required" or not isinstance(choice, str):
                sys.exit(f"tool_choice={choice!r} but no tool call: {msg}")
            print(f"  assistant: {msg.content!r} ({c.finish_reason})")
            messages.append({"role": "assistant", "content": msg.content or ""})
            return calls_made
        if c.finish_reason != "tool_calls":
            sys.exit(f"tool calls with finish_reason {c.finish_reason!r}")
        if isinstance(choice, dict) and {t.function.name for t in msg.tool_calls} != {choice["function"]["name"]}:
            sys.exit(f"asked for {choice['function']['name']}, got {[t.function.name for t in msg.tool_calls]}")
        messages.append({"role": "assistant", "content": msg.content,
                         "tool_calls": [{"id": t.id, "type": "function",
                                         "function": {"name": t.function.name, "arguments": t.function.arguments}}
                                        for t in msg.tool_calls]})
        for t in msg.tool_calls:
            messages.append({"role": "tool", "tool_call_id": t.id, "content": run_call(t)})
            calls_made += 1
    sys.exit("unreachable: the last round has tool_choice none")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"))
    ap.add_argument("--model", help="default: the server's model")
    a = ap.parse_args()

    client = OpenAI(base_url=a.base_url, api_key=a.api_key, max_retries=0)
    model = a.model or client.models.list().data[0].id
    messages = [{"role": "system", "content": "You are a helpful assistant. Use the tools when they help."}]
    calls = turn(client, model, messages, "Weather in Paris?", "required")
    calls += turn(client, model, messages, "What is 17 plus 25?",
                  {"type": "function", "function": {"name": "add"}})
    calls += turn(client, model, messages, "How tall is the Eiffel Tower?", "auto")
    print(f"{calls} tool calls, all valid; {len(messages)} messages in the conversation")
    print(f"final answer: {messages[-1]['content']}")


if __name__ == "__main__":
    main()
