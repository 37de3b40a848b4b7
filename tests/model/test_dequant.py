"""Dequantization against the gguf Python package.

Writes GGUF files with gguf.GGUFWriter, one tensor per supported type (F32,
F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K) with several blocks and rows, has
dequant_cli (env var DEQUANT_CLI_BIN) dequantize each one, and compares with
gguf.quants.dequantize on the same bytes.

Quantized tensors come two ways: gguf.quants.quantize of random floats where
the package can quantize the type, and random bytes for every type, with the
f16 scale fields overwritten by finite, moderate values, so that every nibble
and every scale bit pattern is exercised (a wrong nibble order or scale
unpacking changes the output). F16 and BF16 tensors hold all 65536 bit
patterns, subnormals, infinities and NaNs included, and are compared bit for
bit.
"""
import os
import pathlib
import subprocess

import numpy as np
import pytest

import gguf
from gguf import GGMLQuantizationType as Q
from gguf.constants import GGML_QUANT_SIZES

RNG_SEED = 20240605


@pytest.fixture(scope="session")
def dequant_cli():
    path = os.environ.get("DEQUANT_CLI_BIN")
    if not path:
        pytest.fail("DEQUANT_CLI_BIN is not set: build the dequant_cli target and point it there")
    if not pathlib.Path(path).is_file():
        pytest.fail("DEQUANT_CLI_BIN=%s is not a file" % path)
    return path


def f16_field(rng, n):
    """n finite f16 scale values, magnitudes 2^-12 .. 2, either sign, as uint8 pairs."""
    mag = np.exp2(rng.uniform(-12, 1, size=n))
    sign = rng.choice([-1.0, 1.0], size=n)
    return (mag * sign).astype(np.float16).view(np.uint8).reshape(n, 2)


# Offsets of the f16 fields inside one block, per type.
F16_FIELDS = {
    Q.Q8_0: [0],
    Q.Q4_0: [0],
    Q.Q4_1: [0, 2],
    Q.Q4_K: [0, 2],
    Q.Q5_K: [0, 2],
    Q.Q6_K: [208],
}


def random_blocks(rng, qtype, rows, blocks_per_row):
    """Random bytes for rows x blocks_per_row blocks of qtype, scales sane."""
    _, bsize = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(rows * blocks_per_row, bsize), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        raw[:, off:off + 2] = f16_field(rng, raw.shape[0])
    return raw.reshape(rows, blocks_per_row * bsize)


def build_cases(rng):
    """name -> (qtype, uint8 array of shape (rows, bytes_per_row))."""
    cases = {}
    # F32: normal values plus specials, with 3 rows.
    f = rng.standard_normal(3 * 40).astype(np.float32)
    f[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45]
    cases["f32"] = (Q.F32, f.view(np.uint8).reshape(3, 160))
    # F16 and BF16: every bit pattern, 256 rows of 256.
    every = np.arange(65536, dtype=np.uint16)
    cases["f16_all"] = (Q.F16, every.view(np.uint8).reshape(256, 512))
    cases["bf16_all"] = (Q.BF16, every.view(np.uint8).reshape(256, 512))
    # Quantized by the package where it can (3 rows, several blocks per row).
    for qtype, cols in ((Q.Q8_0, 96), (Q.Q4_0, 128), (Q.Q4_1, 160)):
        x = (rng.standard_normal((3, cols)) * rng.uniform(0.01, 3.0, size=(3, 1))).astype(np.float32)
        x[0, :32] = 0.0  # an all-zero block: d == 0
        q = gguf.quants.quantize(x, qtype)
        assert q.dtype == np.uint8
        cases["%s_quantized" % qtype.name.lower()] = (qtype, q)
    # Random blocks for every quantized type (the only source for the K types,
    # which the package cannot quantize).
    for qtype, bpr in ((Q.Q8_0, 5), (Q.Q4_0, 5), (Q.Q4_1, 5), (Q.Q4_K, 3), (Q.Q5_K, 3), (Q.Q6_K, 3)):
        cases["%s_random" % qtype.name.lower()] = (qtype, random_blocks(rng, qtype, 4, bpr))
    return cases


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    rng = np.random.default_rng(RNG_SEED)
    cases = build_cases(rng)
    path = tmp_path_factory.mktemp("dequant") / "types.gguf"
    w = gguf.GGUFWriter(str(path), "sieve-test")
    for name, (qtype, raw) in cases.items():
        w.add_tensor(name, raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, cases


def run_cli(cli, path, name, out):
    return subprocess.run([cli, str(path), name, str(out)], capture_output=True, text=True)


def sieve_dequant(cli, path, name, tmp_path):
    out = tmp_path / (name + ".f32")
    r = run_cli(cli, path, name, out)
    assert r.returncode == 0, "dequant_cli failed on %s: %s" % (name, r.stderr)
    return np.fromfile(out, dtype="<f4")


def test_covers_every_supported_type(gguf_file):
    _, cases = gguf_file
    assert {q for q, _ in cases.values()} == {Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1,
                                              Q.Q4_K, Q.Q5_K, Q.Q6_K}


@pytest.mark.parametrize("name", ["f32", "f16_all", "bf16_all"])
def test_float_types_bit_exact(dequant_cli, gguf_file, tmp_path, name):
    path, cases = gguf_file
    qtype, raw = cases[name]
    got = sieve_dequant(dequant_cli, path, name, tmp_path)
    want = np.asarray(gguf.quants.dequantize(raw, qtype), dtype=np.float32).ravel()
    assert got.shape == want.shape
    gb, wb = got.view(np.uint32), want.view(np.uint32)
    nan = np.isnan(want)
    # Non-NaNs bit for bit (signed zeros, subnormals, infinities included).
    assert np.array_equal(gb[~nan], wb[~nan])
    # NaNs stay NaNs with their sign (numpy may quiet a signalling NaN).
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(gb[nan] >> 31, wb[nan] >> 31)
    if name != "f32":
        assert nan.sum() >= 254 and np.isinf(want).sum() == 2


@pytest.mark.parametrize("name", ["q8_0_quantized", "q4_0_quantized", "q4_1_quantized",
                                  "q8_0_random", "q4_0_random", "q4_1_random",
                                  "q4_k_random", "q5_k_random", "q6_k_random"])
def test_quantized_types(dequant_cli, gguf_file, tmp_path, name):
    path, cases = gguf_file
    qtype, raw = cases[name]
    got = sieve_dequant(dequant_cli, path, name, tmp_path)
    want = np.asarray(gguf.quants.dequantize(raw, qtype), dtype=np.float32).ravel()
    block, _ = GGML_QUANT_SIZES[qtype]
    assert want.size == raw.shape[0] * (raw.shape[1] // GGML_QUANT_SIZES[qtype][1]) * block
    assert got.shape == want.shape
    assert np.all(np.isfinite(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    # The data is varied enough that a layout mistake could not hide.
    assert np.unique(want).size > want.size // 8


def test_unsupported_type_is_an_error(dequant_cli, tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    path = tmp_path / "q5.gguf"
    w = gguf.GGUFWriter(str(path), "sieve-test")
    w.add_tensor("q5", gguf.quants.quantize(x, Q.Q5_0), raw_dtype=Q.Q5_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = tmp_path / "q5.f32"
    r = run_cli(dequant_cli, path, "q5", out)
    assert r.returncode != 0
    assert "Q5_0" in r.stderr and "unsupported" in r.stderr
    # A tensor that is not there is an error too.
    r = run_cli(dequant_cli, path, "nope", out)
    assert r.returncode != 0 and "nope" in r.stderr


def test_truncated_file_is_an_error(dequant_cli, gguf_file, tmp_path):
    path, _ = gguf_file
    data = path.read_bytes()
    short = tmp_path / "short.gguf"
    short.write_bytes(data[:-100])
    r = run_cli(dequant_cli, short, "q6_k_random", tmp_path / "x.f32")
    assert r.returncode != 0
    assert "dequant_cli" in r.stderr and r.stderr.strip()
