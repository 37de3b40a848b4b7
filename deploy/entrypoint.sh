#!/bin/sh
# entrypoint.sh — the images' ENTRYPOINT: `sieve serve` on 0.0.0.0:8000 on the
# model in /models, fetched first when it is missing.
#
#   docker run sieve:cpu                          # the defaults below
#   docker run sieve:cpu --device cpu --threads 4 # extra flags are appended;
#                                                 # a flag given again wins (sieve
#                                                 # takes the last of a repeated flag)
#
# Environment (the Dockerfiles set the defaults):
#   SIEVE_MODEL  the model file (default /models/SmolLM2-135M-Instruct.Q4_1.gguf)
#   SIEVE_HOST   --host (default 0.0.0.0)
#   SIEVE_PORT   --port (default 8000; the image's HEALTHCHECK reads it too)
#   SIEVE_FETCH_MODEL=0  never fetch: a missing model is an error
#   SIEVE_BIN, SIEVE_FETCH  the sieve binary and scripts/fetch-model.sh (tests
#                set them; in the image /usr/local/bin/sieve and
#                /opt/sieve/scripts/fetch-model.sh)
#
# Only the default model can be fetched: scripts/fetch-model.sh installs
# SmolLM2-135M-Instruct into <its root>/models, and in the image
# /opt/sieve/models is a link to /models. Any other model must be on the
# volume already.
set -eu

SIEVE_BIN=${SIEVE_BIN:-/usr/local/bin/sieve}
SIEVE_FETCH=${SIEVE_FETCH:-/opt/sieve/scripts/fetch-model.sh}
SIEVE_MODEL=${SIEVE_MODEL:-/models/SmolLM2-135M-Instruct.Q4_1.gguf}
SIEVE_HOST=${SIEVE_HOST:-0.0.0.0}
SIEVE_PORT=${SIEVE_PORT:-8000}
default_name=SmolLM2-135M-Instruct.Q4_1.gguf

if [ ! -e "$SIEVE_MODEL" ]; then
  if [ "$(basename "$SIEVE_MODEL")" != "$default_name" ]; then
    echo "entrypoint: $SIEVE_MODEL is missing; only $default_name can be fetched:" \
         "put the model on the volume mounted at $(dirname "$SIEVE_MODEL")" >&2
    exit 1
  fi
  if [ "${SIEVE_FETCH_MODEL:-1}" = 0 ]; then
    echo "entrypoint: $SIEVE_MODEL is missing and SIEVE_FETCH_MODEL=0" >&2
    exit 1
  fi
  echo "entrypoint: $SIEVE_MODEL is missing; fetching it with $SIEVE_FETCH" >&2
  fetched=$("$SIEVE_FETCH")
  if [ ! -e "$SIEVE_MODEL" ]; then
    echo "entrypoint: $SIEVE_FETCH wrote $fetched, not $SIEVE_MODEL" >&2
    exit 1
  fi
fi

exec "$SIEVE_BIN" serve --host "$SIEVE_HOST" --port "$SIEVE_PORT" -m "$SIEVE_MODEL" "$@"
