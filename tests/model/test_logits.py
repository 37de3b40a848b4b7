"""sieve's CPU forward pass against the NumPy reference (tests/ref/llama_ref.py).

    LOGITS_CLI_BIN=build/tests/logits_cli .venv/bin/python -m pytest -q tests/model/test_logits.py

LOGITS_CLI_BIN names sieve's logits tool (the tests that need it fail, not skip, without it):
    $LOGITS_CLI_BIN MODEL --ids 1,2,3 --out OUT.f32   the logits of every position, little-endian
                                                     float32 (n_ids, vocab) row-major; prints
                                                     {"vocab": V, "n": N}
    $LOGITS_CLI_BIN MODEL --ids 1,2,3 --greedy 32     prints 32 generated ids, comma-separated
MODEL is a GGUF file or a Hugging Face folder (config.json + model.safetensors).

Models: tiny random Llama, Qwen2 and Qwen3 models written by tests/fixtures/make_tiny_llama.py into a
temporary folder, each as a GGUF (llama: Q/K rows permuted to adjacent-pair RoPE, as llama.cpp's
converter does) and as an HF folder with the same weights (rotate-half RoPE), plus an HF Llama
with tied embeddings; and the default model models/SmolLM2-135M-Instruct.Q4_1.gguf (tied, Q4_1
and Q8_0 weights), which `make test` fetches first (scripts/fetch-model.sh): missing, it fails.

For each: the logits of every prompt position are within TOL of the reference (max abs), and
32 greedy steps choose the same ids. Equal greedy ids are a fair demand only where the reference's
top-1 minus top-2 logit exceeds 2 * TOL at every step (then nothing within TOL can choose
differently); the prompts are chosen so that it does, and the tests assert it.

Without the tool, the reference and the fixtures are checked on their own: the GGUF and HF files
give the same logits in the reference (to 1e-9), the wrong RoPE layout changes them by O(1) (so
that agreement is not vacuous), the GGUF's Q rows are the HF rows in the documented order, and the
same seed writes the same bytes.
"""
import hashlib
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
REF = ROOT / "tests" / "ref" / "llama_ref.py"
sys.path[:0] = [str(ROOT / "tests" / "ref"), str(ROOT / "tests" / "fixtures")]

import llama_ref  # noqa: E402
import make_tiny_llama  # noqa: E402

TOL = 1e-3     # max abs logit error
STEPS = 32     # greedy steps
SMOLLM = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

# 20 ids over the tiny vocabulary: the control tokens (259 <|bos|>, 260 <|eos|>, the last id),
# byte tokens including 0 and 255, the merged tokens 256..258, a repeat.
TINY_IDS = [259, 72, 101, 108, 108, 111, 44, 256, 258, 0, 255, 32, 119, 111, 114, 108, 100, 33, 257, 260]
# SmolLM2's encoding of "<|im_start|>user\nThe capital of France is" (504 ... 314 are among the
# known ids in tests/tokenizer/test_gguf_parity.py); the reference continues " Paris.\n\n...".
SMOLLM_IDS = [1, 4093, 198, 504, 3575, 282, 4649, 314]

# name -> (arch, tied, format)
TINY = {
    "tiny-llama-gguf": ("llama", False, "gguf"),
    "tiny-llama-hf": ("llama", False, "hf"),
    "tiny-qwen2-gguf": ("qwen2", False, "gguf"),
    "tiny-qwen2-hf": ("qwen2", False, "hf"),
    "tiny-llama-tied-hf": ("llama", True, "hf"),
    "tiny-qwen3-gguf": ("qwen3", False, "gguf"),
    "tiny-qwen3-hf": ("qwen3", False, "hf"),
    "tiny-gemma3-gguf": ("gemma3", False, "gguf"),
    "tiny-gemma3-hf": ("gemma3", False, "hf"),
}
CASES = list(TINY) + ["smollm2-q4_1"]


# ---- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("LOGITS_CLI_BIN")
    if not path:
        pytest.fail("LOGITS_CLI_BIN is not set: it names sieve's logits tool (build it, then "
                    "LOGITS_CLI_BIN=build/tests/logits_cli pytest tests/model/test_logits.py)")
    if not os.access(path, os.X_OK):
        pytest.fail("LOGITS_CLI_BIN=%s is not an executable file" % path)
    return path


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """(arch, tied) -> the folder make_tiny_llama.make wrote, built on first use."""
    root, made = tmp_path_factory.mktemp("tiny"), {}

    def get(arch, tied):
        if (arch, tied) not in made:
            made[arch, tied] = root / ("%s%s" % (arch, "-tied" if tied else ""))
            make_tiny_llama.make(made[arch, tied], arch, tied=tied)
        return made[arch, tied]

    return get


@pytest.fixture(scope="session")
def model_path(tiny_dir):
    def get(case):
        if case == "smollm2-q4_1":
            # `make test` fetches it first; missing is a failure, not a skip
            assert SMOLLM.is_file(), "%s is missing: scripts/fetch-model.sh fetches it" % SMOLLM.relative_to(ROOT)
            return SMOLLM
        arch, tied, fmt = TINY[case]
        d = tiny_dir(arch, tied)
        return d / "tiny.gguf" if fmt == "gguf" else d / "tiny-hf"

    return get


def ids_of(case):
    return SMOLLM_IDS if case == "smollm2-q4_1" else TINY_IDS


@pytest.fixture(scope="session")
def reference(model_path, tmp_path_factory):
    """case -> (prompt logits (n, vocab) float64, greedy ids, top-2 margins), from the reference
    run as its own process (so OPENBLAS_NUM_THREADS=1 holds whatever this process imported)."""
    done, tmp = {}, tmp_path_factory.mktemp("ref")

    def get(case):
        if case not in done:
            path, ids = model_path(case), ids_of(case)
            out = tmp / (case + ".f64")
            env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
            r = subprocess.run([sys.executable, str(REF), str(path), "--ids", ",".join(map(str, ids)),
                                "--greedy", str(STEPS), "--out64", str(out), "--json"],
                               capture_output=True, text=True, timeout=300, env=env)
            assert r.returncode == 0, "reference failed on %s:\n%s" % (path, r.stderr)
            info = json.loads(r.stdout)
            logits = np.fromfile(out, dtype="<f8").reshape(len(ids), info["vocab"])
            done[case] = (logits, info["greedy"], info["margins"])
        return done[case]

    return get


def run_cli(cli, *args, timeout=300):
    r = subprocess.run([cli, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        pytest.fail("%s %s: exit %d\n%s" % (cli, " ".join(map(str, args)), r.returncode, r.stderr.strip()))
    return r.stdout


# ---- sieve against the reference -----------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_logits(case, cli, model_path, reference, tmp_path):
    path, ids = model_path(case), ids_of(case)
    want = reference(case)[0]
    out = tmp_path / "logits.f32"
    stdout = run_cli(cli, path, "--ids", ",".join(map(str, ids)), "--out", out)
    try:
        info = json.loads(stdout)
    except ValueError:
        pytest.fail("%s: stdout is not the JSON object {\"vocab\": V, \"n\": N}: %r" % (case, stdout[:200]))
    assert info == {"vocab": want.shape[1], "n": len(ids)}, "tool says %s, the model has vocab %d" % (
        info, want.shape[1])
    raw = out.read_bytes()
    assert len(raw) == want.size * 4, "%s: %d bytes, expected %d x %d float32" % (out, len(raw), *want.shape)
    got = np.frombuffer(raw, dtype="<f4").reshape(want.shape).astype(np.float64)
    assert np.isfinite(got).all(), "non-finite logits at %s" % (np.argwhere(~np.isfinite(got))[:5].tolist(),)
    err = np.abs(got - want)
    pos, tok = np.unravel_index(np.argmax(err), err.shape)
    worst = float(err[pos, tok])
    if worst > TOL:
        pytest.fail("%s: max |logit error| %.3g > %g at position %d token %d (sieve %.6f, reference %.6f); "
                    "max error per position: %s" % (case, worst, TOL, pos, tok, got[pos, tok], want[pos, tok],
                                                    ", ".join("%.2g" % e for e in err.max(axis=1))))


@pytest.mark.parametrize("case", CASES)
def test_greedy(case, cli, model_path, reference):
    path, ids = model_path(case), ids_of(case)
    _, want, margins = reference(case)
    assert min(margins) > 2 * TOL, (
        "fixture problem, not a sieve one: the reference's top-2 gap at step %d is %.3g, too close to "
        "a tie for a fair comparison; choose other prompt ids" % (int(np.argmin(margins)), min(margins)))
    line = run_cli(cli, path, "--ids", ",".join(map(str, ids)), "--greedy", STEPS).strip()
    try:
        got = [int(s) for s in line.split(",")] if line else []
    except ValueError:
        pytest.fail("%s: stdout is not comma-separated ids: %r" % (case, line[:200]))
    if got != want:
        k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        pytest.fail("%s: greedy ids differ from step %d (of %d; sieve gave %d ids)\n  sieve:     %s\n"
                    "  reference: %s" % (case, k, STEPS, len(got), got, want))


# ---- the reference and the fixtures on their own -------------------------------------------


@pytest.mark.parametrize("arch,tied", [("llama", False), ("qwen2", False), ("llama", True), ("qwen3", False),
                                       ("gemma3", False)])
def test_reference_gguf_equals_hf(arch, tied, tiny_dir):
    """The permuted adjacent-pair GGUF and the rotate-half HF folder are one model. (Not exactly
    equal: the GGUF stores eps as float32, 1e-5 rounds to 9.99999974738e-06.)"""
    d = tiny_dir(arch, tied)
    g = llama_ref.logits(llama_ref.load(d / "tiny.gguf"), TINY_IDS)
    h = llama_ref.logits(llama_ref.load(d / "tiny-hf"), TINY_IDS)
    assert np.abs(g - h).max() < 1e-9, np.abs(g - h).max()


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_rope_layout_matters(arch, tiny_dir):
    """Read with the other RoPE layout, the GGUF computes something else: the test above would
    catch a wrong permutation, and the sieve tests a wrong layout."""
    path = tiny_dir(arch, False) / "tiny.gguf"
    right = llama_ref.load(path)
    assert right.rope == ("pairs" if arch == "llama" else "halves")
    wrong = llama_ref.load(path, rope="halves" if arch == "llama" else "pairs")
    assert np.abs(llama_ref.logits(right, TINY_IDS) - llama_ref.logits(wrong, TINY_IDS)).max() > 1.0


def test_fixture_layout(tiny_dir):
    """What llama.cpp would read: ne reversed from numpy's (out, in), F32, the llama.* keys, and Q/K
    rows per head in the order new 2i = old i, new 2i+1 = old i + d/2 (checked row by row here,
    independently of the reshape in make_tiny_llama.permute_rotary); V and biases-free."""
    import gguf
    from safetensors.numpy import load_file

    d = tiny_dir("llama", False)
    r = gguf.GGUFReader(str(d / "tiny.gguf"))
    hf = load_file(str(d / "tiny-hf" / "model.safetensors"))
    t = {x.name: x for x in r.tensors}
    cfg = make_tiny_llama.make_config("llama")
    assert [int(n) for n in t["token_embd.weight"].shape] == [cfg["hidden"], cfg["vocab"]]
    assert [int(n) for n in t["blk.0.attn_k.weight"].shape] == [cfg["hidden"], cfg["kv_heads"] * cfg["head_dim"]]
    assert all(x.tensor_type == gguf.GGMLQuantizationType.F32 for x in r.tensors)
    assert "output.weight" in t and "blk.0.attn_q.bias" not in t
    for key, val in [("general.architecture", "llama"), ("llama.embedding_length", 64), ("llama.block_count", 2),
                     ("llama.feed_forward_length", 128), ("llama.attention.head_count", 4),
                     ("llama.attention.head_count_kv", 2), ("llama.rope.dimension_count", 16),
                     ("llama.context_length", 256), ("llama.vocab_size", 261), ("llama.rope.freq_base", 10000.0),
                     ("tokenizer.ggml.model", "gpt2")]:
        assert r.fields[key].contents() == val, key
    hd = cfg["head_dim"]
    for name, hf_name, heads in [("blk.1.attn_q.weight", "model.layers.1.self_attn.q_proj.weight", cfg["heads"]),
                                 ("blk.1.attn_k.weight", "model.layers.1.self_attn.k_proj.weight", cfg["kv_heads"])]:
        g, h = np.asarray(t[name].data), hf[hf_name]
        for head in range(heads):
            for i in range(hd // 2):
                assert (g[head * hd + 2 * i] == h[head * hd + i]).all()
                assert (g[head * hd + 2 * i + 1] == h[head * hd + i + hd // 2]).all()
    assert (np.asarray(t["blk.1.attn_v.weight"].data) == hf["model.layers.1.self_attn.v_proj.weight"]).all()


def test_fixture_deterministic(tmp_path):
    def digests(folder):
        return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(folder.rglob("*")) if p.is_file()}

    for arch in ("llama", "qwen2"):
        make_tiny_llama.make(tmp_path / ("a-" + arch), arch, seed=7)
        make_tiny_llama.make(tmp_path / ("b-" + arch), arch, seed=7)
        make_tiny_llama.make(tmp_path / ("c-" + arch), arch, seed=8)
        a, b, c = (digests(tmp_path / (x + arch)) for x in ("a-", "b-", "c-"))
        assert len(a) == 5 and a == b
        assert a["tiny.gguf"] != c["tiny.gguf"] and a["tiny-hf/model.safetensors"] != c["tiny-hf/model.safetensors"]


# ---- --cpu-kernels int8 (8-bit activations, integer products) ----------------------------------

# The int8 kernels round each activation block to 8 bits (src/backend/cpu_int8.h), so their
# logits are not the reference's: measured on SmolLM2 Q4_1 at the prompt below, max |error|
# 0.82 and rms 0.20 (logits there span about 30). The bounds are about twice that: a kernel
# that mixes up blocks, scales or nibbles is off by whole units everywhere.
INT8_MAX_ERR = 1.5
INT8_RMS_ERR = 0.4
INT8_GREEDY = 16


def test_int8_kernels_smollm2(cli, model_path, reference, tmp_path):
    path, ids = model_path("smollm2-q4_1"), ids_of("smollm2-q4_1")
    want, greedy, margins = reference("smollm2-q4_1")
    outs = {}
    for k in ("int8", "int8-scalar"):
        outs[k] = tmp_path / (k + ".f32")
        run_cli(cli, path, "--ids", ",".join(map(str, ids)), "--out", outs[k], "--cpu-kernels", k)
    assert outs["int8"].read_bytes() == outs["int8-scalar"].read_bytes(), \
        "the SIMD int8 kernels and the plain C ones give different logits"
    got = np.frombuffer(outs["int8"].read_bytes(), dtype="<f4").reshape(want.shape).astype(np.float64)
    err = np.abs(got - want)
    rms = float(np.sqrt((err ** 2).mean()))
    assert err.max() <= INT8_MAX_ERR and rms <= INT8_RMS_ERR, (
        "int8 logits: max |error| %.3g (bound %g), rms %.3g (bound %g)" % (err.max(), INT8_MAX_ERR, rms, INT8_RMS_ERR))
    line = run_cli(cli, path, "--ids", ",".join(map(str, ids)), "--greedy", INT8_GREEDY, "--cpu-kernels", "int8")
    got_ids = [int(s) for s in line.strip().split(",")]
    want_ids = greedy[:INT8_GREEDY]
    if got_ids != want_ids:
        k = next(i for i, (a, b) in enumerate(zip(got_ids, want_ids)) if a != b)
        pytest.fail("int8 greedy ids leave the reference's at step %d, where its top-2 gap is %.3g\n"
                    "  int8:      %s\n  reference: %s" % (k, margins[k], got_ids, want_ids))


def test_qk_norm_matters(tiny_dir):
    """Without its per-head Q/K norms the Qwen3 fixture computes something else, so the qwen3
    cases above check that sieve applies them (and to the right heads)."""
    m = llama_ref.load(tiny_dir("qwen3", False) / "tiny.gguf")
    right = llama_ref.logits(m, TINY_IDS)
    for L in m.layers:
        L.q_norm = L.k_norm = None
    assert np.abs(right - llama_ref.logits(m, TINY_IDS)).max() > 0.1


def test_gemma3_parts_matter(tiny_dir):
    """Each thing Gemma 3 adds to the Llama block changes the fixture's logits by O(1), so the
    gemma3 cases above check that sieve does each: the sliding window (4 positions; the prompt
    and the greedy path run past it), which layers are global (the sixth), the post-norms of
    both blocks, GeGLU instead of SwiGLU, the embedding scale, the local layers' RoPE base."""
    m = llama_ref.load(tiny_dir("gemma3", False) / "tiny.gguf")
    right = llama_ref.logits(m, TINY_IDS)
    assert m.window == 4 and [L.sliding for L in m.layers] == [True] * 5 + [False]

    def changed(edit):
        w = llama_ref.load(tiny_dir("gemma3", False) / "tiny.gguf")
        edit(w)
        return np.abs(right - llama_ref.logits(w, TINY_IDS)).max()

    def no_post_norms(w):
        for L in w.layers:
            L.post_attn_norm = L.post_ffn_norm = None

    def all_sliding(w):
        for L in w.layers:
            L.sliding = True

    assert changed(lambda w: setattr(w, "window", 10 ** 6)) > 1.0
    assert changed(all_sliding) > 0.5
    assert changed(no_post_norms) > 1.0
    assert changed(lambda w: setattr(w, "act", "silu")) > 1.0
    assert changed(lambda w: setattr(w, "embed_scale", 1.0)) > 1.0
    assert changed(lambda w: setattr(w, "theta_local", w.theta)) > 0.1


@pytest.mark.parametrize("fmt", ["gguf", "hf"])
def test_gemma3_rope_scaling(fmt, cli, tmp_path):
    """Linear RoPE scaling (Gemma 3 4B and up: factor 8) applies to the global layers only: the
    fixture with factor 8 against the reference, GGUF (rope.scaling.*) and HF (rope_scaling)."""
    g, h = make_tiny_llama.make(tmp_path / "g8", "gemma3", rope_factor=8.0)
    path = g if fmt == "gguf" else h
    m = llama_ref.load(path)
    prompt, want_ids, margins = llama_ref.run(m, TINY_IDS, STEPS)
    assert min(margins) > 2 * TOL
    out = tmp_path / "logits.f32"
    run_cli(cli, path, "--ids", ",".join(map(str, TINY_IDS)), "--out", out)
    got = np.fromfile(out, dtype="<f4").reshape(prompt.shape).astype(np.float64)
    assert np.abs(got - prompt).max() < TOL
    line = run_cli(cli, path, "--ids", ",".join(map(str, TINY_IDS)), "--greedy", STEPS).strip()
    assert [int(s) for s in line.split(",")] == want_ids


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_rope_parameters_config(arch, cli, tiny_dir, tmp_path):
    """transformers 5 writes RoPE as rope_parameters (one object, or one per layer type for
    Gemma 3) instead of rope_theta, rope_scaling and rope_local_base_freq. The same model
    written both ways gives the same logits, bit for bit, and the base read from
    rope_parameters is not the default (the logits move when it changes)."""
    import shutil

    src = tiny_dir(arch, False) / "tiny-hf"
    cfg = json.loads((src / "config.json").read_text())

    def write(name, c):
        d = tmp_path / name
        shutil.copytree(src, d)
        (d / "config.json").write_text(json.dumps(c))
        out = tmp_path / (name + ".f32")
        run_cli(cli, d, "--ids", ",".join(map(str, TINY_IDS)), "--out", out)
        return out.read_bytes()

    old = dict(cfg, rope_theta=5.0e5)
    new = {k: v for k, v in cfg.items() if k not in ("rope_theta", "rope_scaling", "rope_local_base_freq")}
    if arch == "gemma3":
        old.update(rope_local_base_freq=2.0e4, rope_scaling={"rope_type": "linear", "factor": 4.0})
        new["rope_parameters"] = {"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 5.0e5},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 2.0e4}}
    else:
        new["rope_parameters"] = {"rope_type": "default", "rope_theta": 5.0e5}
    a, b = write("old", old), write("new", new)
    assert a == b
    moved = json.loads(json.dumps(new))
    if arch == "gemma3":
        moved["rope_parameters"]["sliding_attention"]["rope_theta"] = 1.0e4
    else:
        moved["rope_parameters"]["rope_theta"] = 1.0e4
    assert write("moved", moved) != a
