#!/usr/bin/env bash
# tests/gpu/check.sh — every CUDA check in one script, for a machine with an
# NVIDIA GPU (issue 8). Budget: under 5 minutes on an H200.
#
#   tests/gpu/check.sh --prepare   (here, before sending the tree to the GPU
#                                   machine: writes the tiny fixture model, with
#                                   .venv's Python, and the .debs of the build's
#                                   system packages into tests/gpu/fixture/,
#                                   which git ignores)
#   tests/gpu/check.sh             (on the GPU machine; with the device tool:
#                                   run(command="tests/gpu/check.sh",
#                                       carry=["tests/gpu/fixture"], timeout_s=600))
#
# Steps, each with a time limit, each recorded as PASS / FAIL / MISSING in
# results.txt:
#   deps       jansson, PCRE2 and pkg-config: the image's, or the .debs that
#              --prepare downloaded (unpacked into build-gpu/work/sysroot)
#   build      CUDA build of sieve and the tests/gpu programs (sm_90 by
#              default; CUDA_ARCH=80 or "80;90" to change), warnings shown
#   kernels    gpu_test_kernels: every backend op vs the CPU backend
#   sample     gpu_test_sample: the mask+sample kernel vs the CPU sampler
#   e2e-tiny   gpu_test_e2e on the tiny fixture (GGUF and HF) and on random
#              tiny/small models (llama, and qwen2 for the bias path)
#   cli        sieve generate --device cuda vs --device cpu on the fixture:
#              the same greedy ids; constrained (JSON schema, regex) outputs
#              valid (checked with Python's json and re)
#   e2e-small, e2e-1b also in bf16 mode (--bf16: bf16 weights and
#              activations, looser tolerances)
#   e2e-1b     gpu_test_e2e on a random Llama-3.2-1B-shape model (BF16,
#              written on the spot by make_random_llama)
#   bench      gpu_bench on that model: decode at batch 1/8/64/256, prefill,
#              mask+sample at batch 64; bench-bf16 the same in bf16 mode
#   bench-1b-long  bf16 decode at context 4096 (attention's share grows)
#   gemv-rows-1b, gemv-rows-135m: bf16 decode at batch 1, 2, 4, 8 with the
#              matrix-vector kernel's row limit lowered (SV_CUDA_GEMV_ROWS=0,
#              2, 4; cuda.c): where cuBLAS overtakes it
#   engine-1b  tests/gpu/engine_bench.py: the engine (generate --batch) on
#              the 1B shape with the Llama 3 tokenizer, 64 rows running,
#              constrained (schemas/) against unconstrained tokens/s;
#              engine-1b-pf4 with 4 mask prefetch workers, engine-1b-host
#              with --host-sampling
#   bench-135m the same on a random SmolLM2-135M-shape model
#   profile-1b, profile-135m: ncu's time per kernel of an eager bf16 decode
#              step at batch 1 (when ncu is on the PATH); profile-attn the
#              attention kernel's stall reasons
#   memcheck, memcheck-s, racecheck: the kernel and sampler tests (--quick)
#              under compute-sanitizer, when the run has time left (SANITIZE=1)
# SKIP_STEPS="bench bench-135m ..." leaves the steps named out (SKIPPED in
# results.txt, and the exit status is then 3, not 0: a partial run; to spend
# a short device budget on what changed).
# Output: everything goes to $OUT/check.log and the summary to
# $OUT/results.txt ($OUT defaults to build-gpu/out). Exit status 0 when every
# step passed, 1 when one failed, 3 when none failed but one could not run
# (MISSING: e.g. no fixture; SKIPPED: SKIP_STEPS; the log says why).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
FIXTURE=$ROOT/tests/gpu/fixture
DEB_PACKAGES="libjansson-dev libjansson4 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0
              libpcre2-posix3 pkgconf pkgconf-bin libpkgconf3 pkg-config
              libevent-dev libevent-2.1-7 libevent-core-2.1-7 libevent-pthreads-2.1-7
              libevent-extra-2.1-7 libevent-openssl-2.1-7 libsqlite3-dev libsqlite3-0"
PKGS="jansson libpcre2-8 libevent libevent_pthreads sqlite3"

if [ "${1:-}" = "--prepare" ]; then
    py=$ROOT/.venv/bin/python
    [ -x "$py" ] || py=python3
    rm -rf "$FIXTURE" && mkdir -p "$FIXTURE/debs" &&
        "$py" "$ROOT/tests/fixtures/make_tiny_llama.py" "$FIXTURE" ||
        { echo "check.sh --prepare: make_tiny_llama.py failed" >&2; exit 1; }
    # The build's system packages, in case the GPU machine's image lacks them
    # (it has no package registry): unpacked there only when pkg-config
    # cannot find jansson and libpcre2-8.
    (cd "$FIXTURE/debs" && apt-get download $DEB_PACKAGES >/dev/null 2>&1) ||
        { echo "check.sh --prepare: apt-get download failed" >&2; exit 1; }
    # The Llama 3 tokenizer, for the engine bench on the 1B shape (its
    # vocabulary is the shape's): constrained decoding needs a real one.
    tok=$ROOT/../shared/data/tokenizers/llama3
    if [ -f "$tok/tokenizer.json" ]; then
        mkdir -p "$FIXTURE/llama3" && cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$FIXTURE/llama3/"
    else
        echo "check.sh --prepare: no Llama 3 tokenizer at $tok: the engine-1b step will be MISSING" >&2
    fi
    echo "check.sh --prepare: wrote $FIXTURE (tiny.gguf, tiny-hf/, debs/, llama3/); do not commit it"
    exit 0
fi

OUT=${OUT:-$BUILD/out}
mkdir -p "$OUT" "$BUILD"
LOG=$OUT/check.log
RES=$OUT/results.txt
: >"$LOG"
: >"$RES"
# Everything goes to the log; fd 3 (the caller's stdout) gets the progress
# and the results.
exec 3>&1 >>"$LOG" 2>&1
WORK=$BUILD/work          # large files (the 1B model) stay out of $OUT
mkdir -p "$WORK"
T0=$(date +%s)
STATUS=0

# record NAME STATUS DETAIL
record() {
    local line
    line=$(printf '%-10s %-8s %s' "$1" "$2" "$3")
    echo "$line" >>"$RES"
    echo "$line" >&3
    case $2 in
    FAIL) STATUS=1 ;;
    MISSING | SKIPPED) [ $STATUS -eq 0 ] && STATUS=3 ;;
    esac
}

# step NAME LIMIT_S COMMAND...: runs the command under a time limit.
step() {
    local name=$1 limit=$2
    shift 2
    case " ${SKIP_STEPS:-} " in
    *" $name "*) record "$name" SKIPPED "in SKIP_STEPS"; return 0 ;;
    esac
    echo
    local line="=== $name (limit ${limit}s, at $(($(date +%s) - T0))s): $*"
    echo "$line"
    echo "$line" >&3
    local t=$(date +%s)
    # through bash -c, so that the exported shell functions below can run
    timeout --kill-after=10 "$limit" bash -c '"$@"' "$name" "$@"
    local rc=$?
    local dt=$(($(date +%s) - t))
    if [ $rc -eq 0 ]; then
        record "$name" PASS "${dt}s"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        record "$name" FAIL "timed out after ${limit}s"
    else
        record "$name" FAIL "exit $rc after ${dt}s"
    fi
    return $rc
}

echo "check.sh: $(date -u) on $(hostname); root $ROOT; build $BUILD; out $OUT"
git -C "$ROOT" log -1 --format='commit %H %s' 2>/dev/null || true
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>&1 || true
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
nvcc --version 2>&1 | tail -2

# ---- system packages: jansson, PCRE2, pkg-config ------------------------------------------
# Runs in this shell (it exports the paths the build and the programs need).
deps() {
    if [ -z "${SV_FORCE_CARRIED_DEBS:-}" ] && command -v pkg-config >/dev/null &&
        pkg-config --exists $PKGS; then
        echo "deps: pkg-config finds $PKGS"
        return 0
    fi
    local debs=$ROOT/tests/gpu/fixture/debs f
    if ! ls "$debs"/*.deb >/dev/null 2>&1; then
        echo "deps: jansson / libpcre2-8 / pkg-config missing and no carried packages in $debs"
        echo "      (run 'tests/gpu/check.sh --prepare' before sending the tree)"
        return 1
    fi
    SYSROOT=$WORK/sysroot
    rm -rf "$SYSROOT" && mkdir -p "$SYSROOT" || return 1
    for f in "$debs"/*.deb; do
        if command -v dpkg >/dev/null; then
            dpkg -x "$f" "$SYSROOT" || return 1
        else
            (cd "$SYSROOT" && ar p "$f" data.tar.xz | tar xJ) || return 1
        fi
    done
    export PATH=$SYSROOT/usr/bin:$PATH
    export LD_LIBRARY_PATH=$SYSROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PKG_CONFIG_SYSROOT_DIR=$SYSROOT
    export PKG_CONFIG_LIBDIR=$SYSROOT/usr/lib/x86_64-linux-gnu/pkgconfig:$SYSROOT/usr/share/pkgconfig
    pkg-config --exists $PKGS || return 1
    echo "deps: using the carried packages, unpacked in $SYSROOT"
}
echo
echo "=== deps"
if deps; then
    record deps PASS ""
else
    record deps FAIL "pkg-config does not find all of $PKGS"
fi

# ---- build -------------------------------------------------------------------------
build() {
    local gen=()
    command -v make >/dev/null || ! command -v ninja >/dev/null || gen=(-G Ninja)
    cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DSV_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >"$OUT/cmake.log" 2>&1 ||
        { cat "$OUT/cmake.log"; return 1; }
    cmake --build "$BUILD" -j "$(nproc)" --target sieve gpu_test_kernels gpu_test_sample \
        gpu_test_e2e gpu_bench make_random_llama 2>&1 | tee "$OUT/build.log" | grep -E 'warning|error|Error' ;
    local rc=${PIPESTATUS[0]}
    echo "build: exit $rc, $(grep -c -i 'warning' "$OUT/build.log") warning lines"
    return "$rc"
}
export -f build
export ROOT BUILD OUT WORK
if ! step build 240 build; then
    echo "check.sh: the build failed; nothing else can run" >&3
    tail -n 40 "$LOG" >&3
    exit 1
fi
B=$BUILD
G=$BUILD/tests/gpu
export B G

# ---- kernels and the sampler ------------------------------------------------------------
step kernels 120 "$G/gpu_test_kernels"
step sample 150 "$G/gpu_test_sample"

# ---- end to end on small models ----------------------------------------------------------
have_fixture=0
if [ -f "$FIXTURE/tiny.gguf" ] && [ -f "$FIXTURE/tiny-hf/config.json" ]; then
    have_fixture=1
elif python3 "$ROOT/tests/fixtures/make_tiny_llama.py" "$WORK/fixture" >/dev/null 2>&1; then
    FIXTURE=$WORK/fixture
    have_fixture=1
fi
e2e_small() {
    local rc=0
    if [ $have_fixture = 1 ]; then
        "$G/gpu_test_e2e" "$FIXTURE/tiny.gguf" --prompt 61 --decode 16 --seqs 8 --tol 1e-3 || rc=1
        "$G/gpu_test_e2e" "$FIXTURE/tiny-hf" --prompt 40 --decode 8 --seqs 5 --tol 1e-3 || rc=1
        # bf16 mode (the CLI's default on CUDA): bf16 weights and activations
        # (tiny.gguf is fp32: rounding its weights adds to the error)
        "$G/gpu_test_e2e" "$FIXTURE/tiny.gguf" --prompt 61 --decode 16 --seqs 8 --tol 0.4 --bf16 || rc=1
    fi
    for spec in "tiny llama" "tiny qwen2" "small llama" "small qwen2"; do
        set -- $spec
        "$G/make_random_llama" "$WORK/rand-$1-$2" --shape "$1" --arch "$2" >/dev/null || return 1
        "$G/gpu_test_e2e" "$WORK/rand-$1-$2" --prompt 100 --decode 12 --seqs 8 --tol 2e-3 || rc=1
        "$G/gpu_test_e2e" "$WORK/rand-$1-$2" --prompt 100 --decode 12 --seqs 8 --tol 0.25 --bf16 || rc=1
    done
    return $rc
}
export -f e2e_small
export FIXTURE have_fixture
step e2e-small 150 e2e_small

# ---- the CLI on CUDA: same greedy ids as the CPU, constrained outputs valid ----------------------
cli_check() {
    local m=$FIXTURE/tiny.gguf rc=0 a b
    a=$("$B/sieve" generate -m "$m" --prompt-ids 1,2,3,4,5 --max-tokens 24 --temperature 0 \
        --print-ids --device cpu 2>/dev/null) || return 1
    b=$("$B/sieve" generate -m "$m" --prompt-ids 1,2,3,4,5 --max-tokens 24 --temperature 0 \
        --print-ids --device cuda --cuda-fp32) || return 1
    echo "cpu  ids: $a"
    echo "cuda ids: $b"
    [ "$a" = "$b" ] || { echo "cli: greedy ids differ between cpu and cuda"; rc=1; }
    printf '%s' '{"type":"object","properties":{"name":{"type":"string","maxLength":8},"n":{"type":"integer"},"ok":{"type":"boolean"}},"required":["name","n","ok"],"additionalProperties":false}' >"$WORK/schema.json"
    for seed in 1 2 3 4 5 6; do
        local out
        out=$("$B/sieve" generate -m "$m" -p "x" --schema "$WORK/schema.json" --max-tokens 120 \
            --temperature 1 --seed $seed --device cuda 2>/dev/null) || { rc=1; continue; }
        python3 -c '
import json, sys
v = json.loads(sys.argv[1])
assert isinstance(v, dict) and set(v) == {"name", "n", "ok"}, v
assert isinstance(v["name"], str) and len(v["name"]) <= 8
# JSON Schema integers include 1.0
assert type(v["n"]) is int or (type(v["n"]) is float and v["n"].is_integer()), v
assert isinstance(v["ok"], bool)
print("valid:", sys.argv[1])' "$out" || { echo "cli: invalid output for seed $seed: $out"; rc=1; }
    done
    for seed in 1 2 3; do
        local out
        out=$("$B/sieve" generate -m "$m" -p "x" --regex '[a-z]{3,6}-[0-9]{2}' --max-tokens 40 \
            --temperature 1 --seed $seed --device cuda 2>/dev/null) || { rc=1; continue; }
        python3 -c '
import re, sys
assert re.fullmatch(r"[a-z]{3,6}-[0-9]{2}", sys.argv[1]), sys.argv[1]
print("valid:", sys.argv[1])' "$out" || { echo "cli: regex output invalid: $out"; rc=1; }
    done
    # The engine (its own thread) on CUDA: generate --batch, constrained lines.
    python3 - "$WORK/batch.jsonl" <<'PY'
import json, sys
schema = {"type": "object", "properties": {"id": {"type": "integer"},
          "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
          "required": ["id", "tags"], "additionalProperties": False}
with open(sys.argv[1], "w") as f:
    for i in range(12):
        f.write(json.dumps({"prompt": "item %d" % i, "schema": schema, "max_tokens": 80,
                            "temperature": 1.0, "seed": i, "n": 1 + i % 3}) + "\n")
PY
    "$B/sieve" generate --batch "$WORK/batch.jsonl" -m "$m" --max-num-seqs 8 --device cuda \
        >"$WORK/batch.out" || { echo "cli: generate --batch --device cuda failed"; return 1; }
    python3 - "$WORK/batch.out" <<'PY' || rc=1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 12, len(lines)
n = 0
for l in lines:
    assert "error" not in l, l
    for o in l["outputs"]:
        v = json.loads(o["text"])
        i = v["id"]  # JSON Schema integers include 1.0
        assert set(v) == {"id", "tags"}, v
        assert type(i) is int or (type(i) is float and i.is_integer()), v
        assert all(t in ("a", "b", "c") for t in v["tags"]) and len(v["tags"]) <= 3, v
        n += 1
print("generate --batch on cuda: %d constrained outputs, all valid" % n)
PY
    # Sampling on the device (the default on CUDA) against --host-sampling:
    # greedy lines (constrained, unconstrained, and a regex whose budget cuts
    # its masks) give the same text; the stats say where rows were sampled.
    python3 - "$WORK/greedy.jsonl" <<'PY'
import json, sys
schema = {"type": "object", "properties": {"id": {"type": "integer"}, "ok": {"type": "boolean"}},
          "required": ["id", "ok"], "additionalProperties": False}
with open(sys.argv[1], "w") as f:
    for i in range(12):
        l = {"prompt": "line %d" % i, "max_tokens": 48, "temperature": 0.0}
        if i % 3 == 0:
            l["schema"] = schema
        elif i % 3 == 1:
            l["regex"], l["max_tokens"] = "[a-z]{2,40}", 10
        f.write(json.dumps(l) + "\n")
PY
    "$B/sieve" generate --batch "$WORK/greedy.jsonl" -m "$m" --max-num-seqs 6 --device cuda \
        --stats "$WORK/dev.stats" >"$WORK/dev.out" &&
        "$B/sieve" generate --batch "$WORK/greedy.jsonl" -m "$m" --max-num-seqs 6 --device cuda \
            --host-sampling --stats "$WORK/host.stats" >"$WORK/host.out" ||
        { echo "cli: generate --batch (greedy, device / host sampling) failed"; return 1; }
    cmp "$WORK/dev.out" "$WORK/host.out" ||
        { echo "cli: device and host sampling gave different greedy lines"; rc=1; }
    python3 - "$WORK/dev.stats" "$WORK/host.stats" <<'PY' || rc=1
import json, sys
d, h = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert d["dev_sampled"] == d["sampled"] > 0, d
assert h["dev_sampled"] == 0 and h["sampled"] == d["sampled"], h
print("greedy: %d tokens sampled on the device, the same lines as on the host" % d["dev_sampled"])
PY
    return $rc
}
export -f cli_check
if [ $have_fixture = 1 ]; then
    step cli 60 cli_check
else
    echo "cli: no fixture (tests/gpu/fixture/ is missing and make_tiny_llama.py cannot run here:"
    echo "     run 'tests/gpu/check.sh --prepare' before sending the tree)"
    record cli MISSING "no tiny fixture with a tokenizer; run check.sh --prepare first"
    record e2e-fixture MISSING "the random tiny models ran, the make_tiny_llama fixture did not"
fi

# gemv_rows MODEL: bf16 decode at 1..8 rows with the matrix-vector
# kernel's row limit at 0 (cuBLAS for every product), 2 and 4; bench-bf16
# has the default (8).
gemv_rows() {
    local r rc=0
    for r in 0 2 4; do
        echo "--- SV_CUDA_GEMV_ROWS=$r"
        SV_CUDA_GEMV_ROWS=$r "$G/gpu_bench" "$1" --ctx 512 --steps 20 --batches 1,2,4,8 --prefill 0 \
            --dtype bf16 || rc=1
    done
    return $rc
}
export -f gemv_rows

# ---- the Llama-3.2-1B shape --------------------------------------------------------------
M1B=$WORK/llama-3.2-1b
step gen-1b 90 "$G/make_random_llama" "$M1B" --shape llama-3.2-1b
if [ -f "$M1B/model.safetensors" ]; then
    step e2e-1b 180 "$G/gpu_test_e2e" "$M1B" --prompt 48 --decode 8 --seqs 4 --tol 2e-2
    step e2e-1b-bf16 120 "$G/gpu_test_e2e" "$M1B" --prompt 48 --decode 8 --seqs 4 --tol 0.5 --bf16
    step bench 150 "$G/gpu_bench" "$M1B" --ctx 512 --steps 10 --batches 1,8,64,256 --prefill 2048
    step bench-bf16 150 "$G/gpu_bench" "$M1B" --ctx 512 --steps 20 --batches 1,2,4,8,16,64,256 \
        --prefill 2048 --dtype bf16
    step bench-1b-long 90 "$G/gpu_bench" "$M1B" --ctx 4096 --steps 10 --batches 1,16 \
        --prefill 0 --dtype bf16
    step gemv-rows-1b 120 gemv_rows "$M1B"
    if [ -f "$FIXTURE/llama3/tokenizer.json" ]; then
        cp "$FIXTURE/llama3/tokenizer.json" "$FIXTURE/llama3/tokenizer_config.json" "$M1B/"
        step engine-1b 300 python3 "$ROOT/tests/gpu/engine_bench.py" --sieve "$B/sieve" --model "$M1B" \
            --schemas "$ROOT/schemas" --requests 128 --max-num-seqs 64 --max-tokens 128 \
            --out "$OUT/engine-1b.json"
        # Four mask prefetch workers instead of one (the GPU machine's CPUs idle).
        step engine-1b-pf4 300 python3 "$ROOT/tests/gpu/engine_bench.py" --sieve "$B/sieve" \
            --model "$M1B" --schemas "$ROOT/schemas" --requests 128 --max-num-seqs 64 --max-tokens 128 \
            --extra=--prefetch-threads=4 --out "$OUT/engine-1b-pf4.json"
        # The same with every row sampled on the host (the logits come back).
        step engine-1b-host 300 python3 "$ROOT/tests/gpu/engine_bench.py" --sieve "$B/sieve" \
            --model "$M1B" --schemas "$ROOT/schemas" --requests 128 --max-num-seqs 64 --max-tokens 128 \
            --extra=--host-sampling --out "$OUT/engine-1b-host.json"
    else
        record engine-1b MISSING "no tests/gpu/fixture/llama3/tokenizer.json: run check.sh --prepare first"
    fi
    if command -v ncu >/dev/null; then
        step profile-1b 90 env SV_CUDA_GRAPHS=0 ncu --clock-control none \
            --metrics gpu__time_duration.sum --launch-count 1200 --print-summary per-kernel \
            "$G/gpu_bench" "$M1B" --ctx 512 --steps 1 --batches 1 --prefill 0 --dtype bf16
    fi
fi
rm -rf "$M1B"

# ---- the SmolLM2-135M shape (the default model's; issue 20's 200 µs step target) -------------
M135=$WORK/smollm2-135m
step gen-135m 60 "$G/make_random_llama" "$M135" --shape smollm2-135m
if [ -f "$M135/model.safetensors" ]; then
    step bench-135m 90 "$G/gpu_bench" "$M135" --ctx 512 --steps 10 --batches 1,8,64,256 --prefill 2048
    step bench-135m-bf16 90 "$G/gpu_bench" "$M135" --ctx 512 --steps 20 --batches 1,2,4,8,16,64,256 \
        --prefill 2048 --dtype bf16
    step gemv-rows-135m 90 gemv_rows "$M135"
    step bench-135m-eager 60 env SV_CUDA_GRAPHS=0 "$G/gpu_bench" "$M135" --ctx 512 --steps 20 \
        --batches 1,8,64 --prefill 0 --dtype bf16
    # Where a step's time goes, kernel by kernel (eager, so each is one launch).
    if command -v ncu >/dev/null; then
        step profile-135m 90 env SV_CUDA_GRAPHS=0 ncu --clock-control none \
            --metrics gpu__time_duration.sum --launch-count 2000 --print-summary per-kernel \
            "$G/gpu_bench" "$M135" --ctx 512 --steps 1 --batches 1 --prefill 0 --dtype bf16
        # The attention kernel's stalls: what its time waits on.
        step profile-attn 60 env SV_CUDA_GRAPHS=0 ncu --kernel-name regex:attention \
            --launch-skip 30 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
            --section LaunchStats --section Occupancy \
            "$G/gpu_bench" "$M135" --ctx 512 --steps 1 --batches 1 --prefill 0 --dtype bf16
    fi
fi
rm -rf "$M135"

# ---- the kernels under compute-sanitizer (out-of-bounds accesses, shared-memory races) ----------
# Last, and only while the run is within its 5 minutes (SANITIZE=1 forces them).
elapsed=$(($(date +%s) - T0))
if ! command -v compute-sanitizer >/dev/null; then
    record sanitizer MISSING "compute-sanitizer is not on the PATH"
elif [ $elapsed -gt 180 ] && [ -z "${SANITIZE:-}" ]; then
    record sanitizer MISSING "not run: ${elapsed}s gone (SANITIZE=1 tests/gpu/check.sh runs them)"
else
    # --report-api-errors no: test_errors asks for 4 PB on purpose
    step memcheck 45 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
        "$G/gpu_test_kernels" --quick
    step memcheck-s 45 compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$G/gpu_test_sample" --quick
    # Without cuBLAS's bf16 products (SV_TEST_NO_BLAS_BF16): racecheck
    # reports hazards inside its nvjet_* kernels (their asynchronous copies;
    # the run of 61ae3aa), not in sieve's code
    step racecheck 45 env SV_TEST_NO_BLAS_BF16=1 compute-sanitizer --tool racecheck \
        --error-exitcode 9 "$G/gpu_test_kernels" --quick
fi

echo
echo "=== results ($(($(date +%s) - T0))s in all)"
cat "$RES"
if [ $STATUS -ne 0 ]; then
    echo "--- the log's last lines ($LOG):" >&3
    tail -n 60 "$LOG" >&3
fi
echo "check.sh: $(($(date +%s) - T0))s, status $STATUS; log $LOG, results $RES" >&3
exit $STATUS
