"""K-quant weights (Q4_K, Q5_K, Q6_K) kept in their blocks: sieve's CPU forward pass against the NumPy
reference (tests/ref/llama_ref.py, which dequantizes with the gguf package).

    LOGITS_CLI_BIN=build/tests/logits_cli .venv/bin/python -m pytest -q tests/model/test_kquant.py

The model is the tiny random Llama of tests/fixtures/make_tiny_llama.py widened to rows of 256 (the
K formats' super-block), its matrices quantized by tests/fixtures/kquant.py the way llama.cpp's
Q4_K_M mixes formats: Q4_K for most, Q6_K for the embedding, the output and half of the value and
down projections, Q5_K for one up projection. So one kind of matrix changes format from layer to
layer, which sieve must keep per layer.

- `--cpu-kernels ref` dequantizes each block exactly as the gguf package does and multiplies in
  fp32: logits within TOL of the reference, and the same greedy ids where the reference's top-2 gap
  leaves room.
- `--cpu-kernels int8` (the default) multiplies the blocks with 8-bit activations: the SIMD kernels
  give the plain C kernels' bytes, the logits differ from the fp32 path's (so the blocks did reach
  the integer kernels rather than being dequantized at load) and stay within INT8 bounds of the
  reference.
"""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import gguf

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "ref"), str(ROOT / "tests" / "fixtures")]

import kquant  # noqa: E402
import llama_ref  # noqa: E402
import make_tiny_llama  # noqa: E402

Q = gguf.GGMLQuantizationType
TOL = 1e-3
STEPS = 16
IDS = [259, 72, 101, 108, 108, 111, 44, 256, 258, 0, 255, 32, 119, 111, 114, 108, 100, 33]
# 8-bit activations against the exact product, on this random model whose logits span about 37:
# measured max 1.53 and rms 0.24 with these formats; the same model in Q4_0 gives 1.76 / 0.22 and
# in Q8_0 2.44 / 0.30 through the older integer kernels. Using one layer's blocks for every layer
# gives 21 / 4.9. (The per-output bound of each kernel is tests/unit/test_backend.c's.)
INT8_MAX_ERR = 3.0
INT8_RMS_ERR = 0.5


def formats(layers):
    """GGUF tensor name -> format, Q4_K_M-like."""
    f = {"token_embd.weight": Q.Q6_K, "output.weight": Q.Q6_K}
    for i in range(layers):
        b = "blk.%d." % i
        for m in ("attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"):
            f[b + m + ".weight"] = Q.Q4_K
        f[b + "attn_v.weight"] = f[b + "ffn_down.weight"] = Q.Q6_K if i % 2 == 0 else Q.Q4_K
    f["blk.0.ffn_up.weight"] = Q.Q5_K
    return f


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    cfg = dict(make_tiny_llama.make_config("llama"), hidden=256, ffn=512, head_dim=64)
    w = make_tiny_llama.make_weights(cfg)
    path = tmp_path_factory.mktemp("kquant") / "tiny-k.gguf"
    make_tiny_llama.write_gguf(path, cfg, w, formats(cfg["layers"]))
    return path


@pytest.fixture(scope="module")
def cli():
    path = os.environ.get("LOGITS_CLI_BIN")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("LOGITS_CLI_BIN must name sieve's logits tool (build/tests/logits_cli)")
    return path


def run_cli(cli, *args):
    r = subprocess.run([cli, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, "%s failed:\n%s" % (cli, r.stderr)
    return r.stdout


def sieve_logits(cli, model, kernels, tmp_path):
    out = tmp_path / (kernels + ".f32")
    run_cli(cli, model, "--ids", ",".join(map(str, IDS)), "--out", out, "--cpu-kernels", kernels)
    return out.read_bytes()


@pytest.mark.parametrize("qtype", [Q.Q4_K, Q.Q5_K, Q.Q6_K])
def test_quantizer_layouts(qtype):
    """The fixture's quantizers write what the gguf package reads back: errors within a step."""
    x = (np.random.default_rng(3).standard_normal((6, 512)) * 0.3).astype(np.float32)
    y = np.asarray(gguf.quants.dequantize(kquant.quantize(x, qtype), qtype)).reshape(x.shape)
    levels = {Q.Q4_K: 15, Q.Q5_K: 31, Q.Q6_K: 63}[qtype]
    step = (x.max() - x.min()) / levels
    assert np.abs(y - x).max() <= step, "%s: error %.3g beyond a step %.3g" % (qtype.name, np.abs(y - x).max(), step)


def test_file_has_the_formats(model):
    r = gguf.GGUFReader(str(model))
    got = {t.name: t.tensor_type for t in r.tensors}
    for name, q in formats(2).items():
        assert got[name] == q, name


def test_ref_kernels(cli, model, tmp_path):
    m = llama_ref.load(model)
    prompt, greedy, margins = llama_ref.run(m, IDS, STEPS)
    got = np.frombuffer(sieve_logits(cli, model, "ref", tmp_path), dtype="<f4").reshape(prompt.shape)
    err = np.abs(got - prompt).max()
    assert err <= TOL, "ref kernels: max |logit error| %.3g > %g" % (err, TOL)
    ids = [int(s) for s in run_cli(cli, model, "--ids", ",".join(map(str, IDS)), "--greedy", STEPS,
                                   "--cpu-kernels", "ref").strip().split(",")]
    # equal ids are a fair demand up to the first step where the reference's top-2 gap is within 2 * TOL
    n = next((i for i, g in enumerate(margins) if g <= 2 * TOL), STEPS)
    assert n >= 8, "the prompt leaves too small a top-2 gap early (%s)" % margins[:8]
    assert ids[:n] == greedy[:n], "ref kernels leave the reference's greedy ids: %s vs %s" % (ids, greedy)


def test_int8_kernels(cli, model, tmp_path):
    m = llama_ref.load(model)
    prompt = llama_ref.logits(m, IDS)
    simd = sieve_logits(cli, model, "int8", tmp_path)
    assert simd == sieve_logits(cli, model, "int8-scalar", tmp_path), \
        "the SIMD int8 kernels and the plain C ones give different logits on K formats"
    assert simd != sieve_logits(cli, model, "ref", tmp_path), \
        "int8 logits equal the fp32 path's: the K blocks were dequantized at load"
    got = np.frombuffer(simd, dtype="<f4").reshape(prompt.shape)
    err = np.abs(got - prompt)
    rms = float(np.sqrt((err ** 2).mean()))
    print("int8 K formats: max |error| %.4f, rms %.4f, logits span %.2f" % (err.max(), rms, np.ptp(prompt)))
    assert err.max() <= INT8_MAX_ERR and rms <= INT8_RMS_ERR, (
        "int8 logits: max |error| %.3g (bound %g), rms %.3g (bound %g)" % (err.max(), INT8_MAX_ERR, rms, INT8_RMS_ERR))
