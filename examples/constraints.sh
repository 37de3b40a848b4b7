#!/usr/bin/env bash
# constraints.sh — compile, check and sample constraints with the sieve CLI.
# Run from the repository root after `make build` (or set SIEVE).
set -euo pipefail
SIEVE=${SIEVE:-build/sieve}

echo "== a regex: statistics of its minimal DFA"
$SIEVE compile --regex '[A-Z]{2}-[0-9]{4}'

echo "== which candidates match (one JSON string literal per line)"
printf '%s\n' '"AB-1234"' '"ab-1234"' '"AB-12345"' | $SIEVE match --regex '[A-Z]{2}-[0-9]{4}'

echo "== a constraint that does not compile: exit code 2 and an error object"
$SIEVE compile --regex 'a(?=b)' || echo "exit $?"

echo "== a JSON Schema: texts it accepts, spelled as json.dumps writes them"
$SIEVE sample --schema schemas/sentiment.json -n 3 --seed 7

echo "== the same schema, compact whitespace"
$SIEVE sample --schema schemas/sentiment.json --ws compact -n 2 --seed 7

echo "== matching candidate JSON texts against a schema"
printf '%s\n' '"{\"label\": \"positive\", \"confidence\": 0.9}"' \
              '"{\"label\": \"great\", \"confidence\": 0.9}"' \
  | $SIEVE match --schema schemas/sentiment.json

echo "== an unsupported keyword is an error naming it and its JSON pointer"
echo '{"type": "array", "items": {"type": "string"}, "uniqueItems": true}' \
  | $SIEVE compile --schema - || echo "exit $?"
