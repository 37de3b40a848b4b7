#!/usr/bin/env bash
# maskbench_compare.sh: sieve, llguidance and XGrammar side by side on the fixed
# MaskBench sample, same machine, same tokenizer, same method, one run.
#
#   tests/bench/maskbench_compare.sh [--out DIR] [--engines "sieve llguidance xgrammar"]
#                                    [--timeout-s 60] [--data DIR] [--sample FILE]
#                                    [--tokenizer FILE] [--sieve BIN] [--python BIN]
#                                    [--tbm step|mask] [--prep DIR] [--cold]
#                                    [--sieve-arg ARG]...
#
# Steps: (1) tests/bench/maskbench_prep.py writes the sampled files, each test
# with its MaskBench instance text, into DIR/prep; (2) `sieve maskbench
# --per-schema` on them; (3) tests/bench/peers/run_peer.py for each peer, one
# engine at a time (peers need the venv of tests/bench/peers/setup.sh); (4) a
# markdown table of the summary objects. Raw outputs: DIR/<engine>.jsonl (one
# line per schema, then the summary). Every engine runs under `nice -n 10`.
# --tbm is passed to the peers: what one TBM sample is ('step' = consume the
# token + compute the next mask, MaskBench's; 'mask' = the mask alone); the
# notes under the table give each peer's mask-only percentiles either way.
# --prep DIR runs the engines on files prepared elsewhere instead of steps
# (1)'s sample (tests/bench/toolsets_ttfm.py --prep-out writes the tool-set
# corpus that way). --cold empties sieve's memo of automata before each
# schema (`sieve maskbench --cold`), so that no schema reuses what an earlier
# one compiled, as neither peer does here. --sieve-arg ARG passes ARG on to
# `sieve maskbench` (repeat it: `--sieve-arg --extra-key-orders --sieve-arg
# false` compiles the tool sets' call schemas as the server compiles tools).
# Needs ../shared/data (MaskBench and the Llama 3 tokenizer); never run in CI.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT=/tmp/maskbench-compare
ENGINES="sieve llguidance xgrammar"
TIMEOUT=60
DATA="$ROOT/../shared/data/maskbench"
SAMPLE="$ROOT/tests/bench/maskbench_sample.txt"
TOKENIZER="$ROOT/../shared/data/tokenizers/llama3/tokenizer.json"
SIEVE="$ROOT/build-rel/sieve"
PY="$ROOT/.venv-peers/bin/python"
TBM=step
PREP=
COLD=
SIEVE_ARGS=()

usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT="$2"; shift 2 ;;
        --engines) ENGINES="$2"; shift 2 ;;
        --timeout-s) TIMEOUT="$2"; shift 2 ;;
        --data) DATA="$2"; shift 2 ;;
        --sample) SAMPLE="$2"; shift 2 ;;
        --tokenizer) TOKENIZER="$2"; shift 2 ;;
        --sieve) SIEVE="$2"; shift 2 ;;
        --python) PY="$2"; shift 2 ;;
        --tbm) TBM="$2"; shift 2 ;;
        --prep) PREP="$2"; shift 2 ;;
        --cold) COLD=--cold; shift ;;
        --sieve-arg) SIEVE_ARGS+=("$2"); shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "maskbench_compare: unknown argument $1" >&2; usage 2 >&2 ;;
    esac
done

mkdir -p "$OUT"
if [ -n "$PREP" ]; then
    for f in "$PREP" "$TOKENIZER"; do
        [ -e "$f" ] || { echo "maskbench_compare: missing $f" >&2; exit 1; }
    done
else
    for f in "$DATA" "$SAMPLE" "$TOKENIZER"; do
        [ -e "$f" ] || { echo "maskbench_compare: missing $f (needs ../shared/data)" >&2; exit 1; }
    done
    PREP="$OUT/prep"
    rm -rf "$PREP"
    python3 "$ROOT/tests/bench/maskbench_sample.py" --data "$DATA" --check "$SAMPLE" ||
        echo "maskbench_compare: warning: $SAMPLE is not the sample drawn from $DATA" >&2
    python3 "$ROOT/tests/bench/maskbench_prep.py" --data "$DATA" --sample "$SAMPLE" --out "$PREP"
fi

RESULTS=()
for e in $ENGINES; do
    raw="$OUT/$e.jsonl"
    rm -f "$raw"
    RESULTS+=("$e=$raw")
    echo "maskbench_compare: running $e -> $raw" >&2
    start=$(date +%s)
    case "$e" in
        sieve)
            if [ ! -x "$SIEVE" ]; then
                echo "maskbench_compare: $SIEVE not built (cmake --build build-rel); skipping sieve" >&2
                continue
            fi
            if ! nice -n 10 "$SIEVE" maskbench --tokenizer "$TOKENIZER" --per-schema $COLD \
                    ${SIEVE_ARGS[@]+"${SIEVE_ARGS[@]}"} --timeout-s "$TIMEOUT" "$PREP" > "$raw" 2> "$OUT/$e.err"; then
                echo "maskbench_compare: sieve maskbench failed (see $OUT/$e.err)" >&2
            fi
            ;;
        llguidance|xgrammar)
            if [ ! -x "$PY" ]; then
                echo "maskbench_compare: no peers venv at $PY (run tests/bench/peers/setup.sh); skipping $e" >&2
                continue
            fi
            if ! nice -n 10 "$PY" "$ROOT/tests/bench/peers/run_peer.py" --engine "$e" \
                    --tokenizer "$TOKENIZER" --per-schema --timeout-s "$TIMEOUT" --tbm "$TBM" "$PREP" \
                    > "$raw" 2> "$OUT/$e.err"; then
                echo "maskbench_compare: run_peer.py --engine $e failed (see $OUT/$e.err)" >&2
            fi
            ;;
        *) echo "maskbench_compare: unknown engine $e" >&2; exit 2 ;;
    esac
    echo "maskbench_compare: $e took $(( $(date +%s) - start )) s" >&2
done

python3 - "${RESULTS[@]}" <<'EOF'
import json, sys

def objects(path):
    """The JSON objects of a raw output, one a line (other lines skipped)."""
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out

def summary(path):
    """The last line of a raw output that is a summary object (has "schemas")."""
    for obj in reversed(objects(path)):
        if "schemas" in obj and "file" not in obj:
            return obj
    return None

def num(x):
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"
    return f"{x:,}"

cols = ["engine", "schemas", "passing", "compile error", "validation error",
        "invalidation error", "timeout", "crash / error", "TTFM p50 (µs)", "TTFM p99 (µs)",
        "TBM p50 (µs)", "TBM p99 (µs)"]
rows, notes = [], []
for arg in sys.argv[1:]:
    name, path = arg.split("=", 1)
    s = summary(path)
    if s is None:
        rows.append([name] + ["n/a"] * (len(cols) - 1))
        continue
    label = s.get("engine", name)
    if s.get("version"):
        label += " " + str(s["version"])
    t, b = s.get("ttfm_us") or {}, s.get("tbm_us") or {}
    rows.append([label, num(s.get("schemas")), num(s.get("passing")), num(s.get("compile_error")),
                 num(s.get("validation_error")), num(s.get("invalidation_error")),
                 num(s.get("timeout")),
                 num(None if "crash" not in s and "error" not in s
                     else (s.get("crash") or 0) + (s.get("error") if isinstance(s.get("error"), int) else 0)),
                 num(t.get("p50")), num(t.get("p99")), num(b.get("p50")), num(b.get("p99"))])
    note = []
    if s.get("tbm"):
        note.append(f"TBM = {s['tbm']}")
    mo = s.get("mask_only_us")
    if isinstance(mo, dict):
        note.append(f"mask only: p50 {num(mo.get('p50'))}, p99 {num(mo.get('p99'))} µs")
    if s.get("config"):
        note.append(str(s["config"]))
    if s.get("wall_s") is not None:
        note.append(f"{s['wall_s']} s wall")
    if note:
        notes.append(f"- {label}: " + "; ".join(note))
w = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
print("| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(cols)) + " |")
print("|" + "|".join(("-" * (w[i] + 1) + ":") if i else ("-" * (w[i] + 2)) for i in range(len(cols))) + "|")
for r in rows:
    print("| " + " | ".join(r[i].ljust(w[i]) if i == 0 else r[i].rjust(w[i]) for i in range(len(cols))) + " |")
if notes:
    print()
    print("\n".join(notes))

# TTFM over the schemas that every engine compiled: each engine's own p99
# above includes the schemas only it compiles (sieve's slowest are mostly
# schemas the peers refuse), so this is the like-for-like tail.
per = {}
for arg in sys.argv[1:]:
    name, path = arg.split("=", 1)
    got = {o["file"]: float(o["ttfm_us"]) for o in objects(path)
           if "file" in o and isinstance(o.get("ttfm_us"), (int, float))}
    if got:
        per[name] = got
if len(per) > 1:
    common = set.intersection(*(set(g) for g in per.values()))
    def rank(xs, q):  # nearest rank
        xs = sorted(xs)
        return xs[max(0, min(len(xs) - 1, -(-len(xs) * q // 100) - 1))] if xs else None
    print()
    print(f"TTFM on the {len(common)} schemas every engine compiled (nearest rank):")
    print()
    print("| engine | TTFM p50 (µs) | TTFM p90 (µs) | TTFM p99 (µs) | TTFM max (µs) |")
    print("|---|---:|---:|---:|---:|")
    for name, got in per.items():
        xs = [got[f] for f in common]
        print(f"| {name} | {num(rank(xs, 50))} | {num(rank(xs, 90))} | {num(rank(xs, 99))} | {num(max(xs) if xs else None)} |")
EOF
