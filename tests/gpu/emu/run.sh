#!/usr/bin/env bash
# tests/gpu/emu/run.sh — the CUDA backend's code, kernels included, run on the CPU through a small
# emulation of the CUDA language and runtime (emu_kernel.h), against the same CPU references and
# with the same test programs as tests/gpu/check.sh. For a machine with the CUDA toolkit's headers
# but no GPU: it checks the logic (indexing, block tables, reductions, barriers, the sampler's
# selection, the backend's error paths, the forward pass and the CLI on the "cuda" device), not
# anything a GPU alone can show (timing, races between blocks, launch limits, real cuBLAS).
#
#     tests/gpu/emu/run.sh [--quick]   (BUILD=build-emu by default; x86-64 only; a few minutes)
#
# The CUDA headers come from CUDA_INC (default /usr/local/cuda/include) when the toolkit is there,
# else from tests/gpu/emu/shim: the emulation's own declarations of the few runtime and cuBLAS
# calls the backend makes, so that CI, with no toolkit, builds and runs it too (.ci/run). --quick
# (CI) runs without tests/gpu/fixture: the kernels, the sampler and the random tiny models, not
# the fixture and CLI checks, which need check.sh --prepare.
#
# Steps: the CPU libraries (cmake, SV_CUDA=OFF), the kernels rewritten by transform.py and
# compiled as C++ with the emulation, src/backend/cuda.c against emu_runtime.cpp, then
# test_kernels --quick, test_sample --quick (sample.cu with 128 threads a block unless
# EMU_SAMPLE_THREADS says otherwise), test_e2e on random tiny llama and qwen2 models (and on the
# tiny fixture when tests/gpu/fixture exists), and check.sh's CLI check with --device cuda.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
EMU=$ROOT/tests/gpu/emu
BUILD=${BUILD:-$ROOT/build-emu}
QUICK=0
[ "${1:-}" = --quick ] && QUICK=1
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
if [ ! -f "$CUDA_INC/cuda_runtime_api.h" ] || [ ! -f "$CUDA_INC/cublas_v2.h" ]; then
    CUDA_INC=$EMU/shim
fi
if [ "$(uname -m)" != x86_64 ]; then
    echo "emu/run.sh: needs x86-64" >&2
    exit 2
fi
echo "emu/run.sh: CUDA headers from $CUDA_INC"

cmake -S "$ROOT" -B "$BUILD" -DSV_CUDA=OFF >/dev/null
cmake --build "$BUILD" -j "${JOBS:-1}" --target sieveserver sievebatch sieveengine >/dev/null
O=$BUILD/emu
mkdir -p "$O"
INC=(-I"$O" -I"$EMU" -I"$ROOT" -I"$CUDA_INC")
sed 's|#include <cuda_runtime.h>|#include "emu_kernel.h"|' "$ROOT/kernels/common.cuh" >"$O/common_emu.cuh"
for k in elementwise attention gemv sample; do
    python3 "$EMU/transform.py" "$ROOT/kernels/$k.cu" "$O/$k.cpp" "${EMU_SAMPLE_THREADS:-128}" >/dev/null
    g++ -std=c++17 -O2 -g -Wall -Wno-unknown-pragmas "${INC[@]}" -c "$O/$k.cpp" -o "$O/$k.o"
done
for f in emu_kernel emu_runtime; do
    g++ -std=c++17 -O2 -g -Wall "${INC[@]}" -c "$EMU/$f.cpp" -o "$O/$f.o"
done
CC_FLAGS=(-std=c11 -O2 -g -Wall -Wextra -D_POSIX_C_SOURCE=200809L "${INC[@]}")
gcc "${CC_FLAGS[@]}" -c "$ROOT/src/backend/cuda.c" -o "$O/cuda.o"
EMU_OBJS=("$O"/cuda.o "$O"/elementwise.o "$O"/attention.o "$O"/gemv.o "$O"/sample.o "$O"/emu_kernel.o "$O"/emu_runtime.o)
LIBS=("$BUILD"/libsieveserver.a "$BUILD"/libsievebatch.a "$BUILD"/libsieveapi.a "$BUILD"/libsieveengine.a "$BUILD"/libsievechat.a
      "$BUILD"/libsieveconstraint.a "$BUILD"/libsievefsm.a "$BUILD"/libsievetokenizer.a "$BUILD"/libsievemodel.a
      "$BUILD"/libsievebackend.a "$BUILD"/libsieveutil.a -ljansson -lpcre2-8 -lsqlite3 -levent_pthreads
      -levent -lm -lpthread)
for t in test_kernels test_sample test_e2e; do
    gcc "${CC_FLAGS[@]}" -c "$ROOT/tests/gpu/$t.c" -o "$O/$t.o"
    g++ -o "$O/$t" "$O/$t.o" "${EMU_OBJS[@]}" "${LIBS[@]}"
done
mkdir -p "$O/cli" "$O/bin"
for f in "$ROOT"/src/cli/*.c; do
    gcc "${CC_FLAGS[@]}" -DSV_HAVE_CUDA=1 -c "$f" -o "$O/cli/$(basename "$f" .c).o"
done
g++ -o "$O/bin/sieve" "$O"/cli/*.o "${EMU_OBJS[@]}" "${LIBS[@]}"
gcc -std=c11 -O2 -Wall -Wextra -o "$O/make_random_llama" "$ROOT/tests/gpu/make_random_llama.c" -lm

status=0
run() { echo "=== $*"; "$@" || { echo "FAILED: $*"; status=1; }; }
run "$O/test_kernels" --quick
run "$O/test_sample" --quick
for a in llama qwen2; do
    "$O/make_random_llama" "$O/rand-tiny-$a" --shape tiny --arch "$a" >/dev/null
    run "$O/test_e2e" "$O/rand-tiny-$a" --prompt 40 --decode 6 --seqs 4 --tol 2e-3 --threads 1
    # bf16 mode: weights and activations rounded to bf16 for the products
    run "$O/test_e2e" "$O/rand-tiny-$a" --prompt 40 --decode 6 --seqs 4 --tol 0.1 --threads 1 --bf16
done
FIXTURE=$ROOT/tests/gpu/fixture
if [ ! -f "$FIXTURE/tiny.gguf" ]; then
    # No prepared fixture (CI): write it, when Python has what it needs
    # (.venv after make test), so the CLI and engine checks run too.
    py=$ROOT/.venv/bin/python
    [ -x "$py" ] || py=python3
    "$py" "$ROOT/tests/fixtures/make_tiny_llama.py" "$O/fixture" >/dev/null 2>&1 && FIXTURE=$O/fixture
fi
if [ -f "$FIXTURE/tiny.gguf" ]; then
    run "$O/test_e2e" "$FIXTURE/tiny.gguf" --prompt 61 --decode 12 --seqs 6 --tol 1e-3 --threads 1
    # check.sh's CLI check, on the emulated device
    source <(sed -n '/^cli_check() {/,/^}/p' "$ROOT/tests/gpu/check.sh")
    export B=$O/bin WORK=$O/work FIXTURE
    mkdir -p "$WORK"
    run cli_check
elif [ $QUICK = 1 ]; then
    echo "emu/run.sh: --quick: no fixture and CLI checks"
else
    echo "emu/run.sh: no tests/gpu/fixture (tests/gpu/check.sh --prepare writes it): the fixture and CLI checks did not run"
    status=3
fi
echo "emu/run.sh: $([ $status = 0 ] && echo 'all passed' || echo "status $status")"
exit $status
