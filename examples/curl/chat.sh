#!/usr/bin/env bash
# chat.sh — sieve's structured outputs with plain curl: a JSON Schema
# response_format (whole, then streamed), a regex and a choice list, each
# answer checked with python3 (standard library only). Exits non-zero on an
# HTTP error or an answer that does not fit its constraint.
#
#   BASE_URL=http://127.0.0.1:8000/v1 [MODEL=NAME] [OPENAI_API_KEY=KEY] bash examples/curl/chat.sh
set -euo pipefail
BASE_URL=${BASE_URL:-http://127.0.0.1:8000/v1}
API_KEY=${OPENAI_API_KEY:-none}
AUTH="Authorization: Bearer $API_KEY"
MODEL=${MODEL:-$(curl -sS --fail-with-body -H "$AUTH" "$BASE_URL/models" |
                 python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])')}
echo "model: $MODEL"

# chat BODY: POST BODY to /chat/completions, print the response and keep it in $R.
chat() {
  R=$(curl -sS --fail-with-body -H "$AUTH" -H "Content-Type: application/json" \
        "$BASE_URL/chat/completions" -d "$1") || { echo "request failed: $R" >&2; exit 1; }
  echo "$R"
}

echo
echo "== 1. response_format json_schema: a city as a JSON object"
SCHEMA='{"type": "object",
         "properties": {"city": {"type": "string", "maxLength": 30},
                        "country": {"type": "string", "maxLength": 30},
                        "population": {"type": "integer", "minimum": 0}},
         "required": ["city", "country", "population"], "additionalProperties": false}'
CITY_REQUEST='"model": "'"$MODEL"'", "max_tokens": 60, "temperature": 0,
  "messages": [{"role": "user", "content": "Give me a large city and its country as JSON."}],
  "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": '"$SCHEMA"'}}'
chat "{$CITY_REQUEST}"
python3 -c '
import json, sys
city = json.loads(json.loads(sys.argv[1])["choices"][0]["message"]["content"])
assert set(city) == {"city", "country", "population"}, city
assert isinstance(city["city"], str) and len(city["city"]) <= 30, city
assert isinstance(city["country"], str) and len(city["country"]) <= 30, city
# an integer is written plainly (8, never 8.0): json.loads gives an int
assert isinstance(city["population"], int), city
assert city["population"] >= 0, city
print("ok:", city)' "$R"

echo
echo "== 2. the same request with \"stream\": true (server-sent events)"
SSE=$(mktemp)
trap 'rm -f "$SSE"' EXIT
curl -sS -N --fail-with-body -H "$AUTH" -H "Content-Type: application/json" \
  "$BASE_URL/chat/completions" -d "{$CITY_REQUEST, \"stream\": true}" | tee "$SSE"
python3 -c '
import json, sys
events = [l for l in open(sys.argv[1]).read().splitlines() if l]
assert events and events[-1] == "data: [DONE]", events[-1:]
text = ""
for e in events[:-1]:
    assert e.startswith("data: "), e
    chunk = json.loads(e[len("data: "):])
    assert chunk["object"] == "chat.completion.chunk", chunk
    text += chunk["choices"][0]["delta"].get("content") or ""
city = json.loads(text)
assert set(city) == {"city", "country", "population"} and isinstance(city["population"], int), city
print("ok: %d events, reassembled %s" % (len(events), city))' "$SSE"

echo
echo "== 3. a regex (top-level \"regex\"; also spelled guided_regex or structured_outputs.regex)"
REGEX='[A-Z]{2}-[0-9]{4}'
chat '{"model": "'"$MODEL"'", "max_tokens": 20, "temperature": 0,
  "messages": [{"role": "user", "content": "Make up a product code like AB-1234."}],
  "regex": "'"$REGEX"'"}'
python3 -c '
import json, re, sys
code = json.loads(sys.argv[1])["choices"][0]["message"]["content"]
assert re.fullmatch(sys.argv[2], code), code
print("ok:", code)' "$R" "$REGEX"

echo
echo "== 4. a choice list (\"choice\"; also spelled guided_choice or structured_outputs.choice)"
CHOICES='["positive", "negative", "neutral"]'
chat '{"model": "'"$MODEL"'", "max_tokens": 10, "temperature": 0,
  "messages": [{"role": "user",
                "content": "Is this review positive, negative or neutral? \"I loved this film, every minute of it.\""}],
  "choice": '"$CHOICES"'}'
python3 -c '
import json, sys
label = json.loads(sys.argv[1])["choices"][0]["message"]["content"]
assert label in json.loads(sys.argv[2]), label
print("ok:", label)' "$R" "$CHOICES"

echo
echo "== 5. the other spellings of the same constraints"
for extra in '"guided_regex": "'"$REGEX"'"' '"structured_outputs": {"regex": "'"$REGEX"'"}' \
             '"guided_choice": '"$CHOICES" '"structured_outputs": {"choice": '"$CHOICES"'}'; do
  R=$(curl -sS --fail-with-body -H "$AUTH" -H "Content-Type: application/json" "$BASE_URL/chat/completions" \
        -d '{"model": "'"$MODEL"'", "max_tokens": 20, "temperature": 0,
             "messages": [{"role": "user", "content": "A product code, or a sentiment."}], '"$extra"'}') ||
    { echo "request failed: $R" >&2; exit 1; }
  python3 -c '
import json, re, sys
answer = json.loads(sys.argv[1])["choices"][0]["message"]["content"]
ok = answer in json.loads(sys.argv[4]) if "choice" in sys.argv[2] else re.fullmatch(sys.argv[3], answer)
assert ok, (sys.argv[2], answer)
print("ok: %-60s -> %s" % (sys.argv[2], answer))' "$R" "$extra" "$REGEX" "$CHOICES"
done

echo
echo "all answers fit their constraints"
