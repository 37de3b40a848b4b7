"""The safetensors reader on files written by the safetensors package.

F32 and F16 tensors go through safetensors.numpy.save_file (the reference
writer: header layout, alignment padding, ordering); BF16, which numpy has no
dtype for, goes into a file whose bytes this test writes itself. dequant_cli
(env var DEQUANT_CLI_BIN) reads each tensor as float32; values must match
bit for bit (F16 and BF16 hold every bit pattern, NaNs compared by NaN-ness
and sign).
"""
import json
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest
from safetensors.numpy import save_file


@pytest.fixture(scope="session")
def dequant_cli():
    path = os.environ.get("DEQUANT_CLI_BIN")
    if not path:
        pytest.fail("DEQUANT_CLI_BIN is not set: build the dequant_cli target and point it there")
    if not pathlib.Path(path).is_file():
        pytest.fail("DEQUANT_CLI_BIN=%s is not a file" % path)
    return path


def run_cli(cli, path, name, out):
    return subprocess.run([cli, str(path), name, str(out)], capture_output=True, text=True)


def read_back(cli, path, name, tmp_path):
    out = tmp_path / (name.replace("/", "_") + ".f32")
    r = run_cli(cli, path, name, out)
    assert r.returncode == 0, "dequant_cli failed on %s: %s" % (name, r.stderr)
    return np.fromfile(out, dtype="<f4")


def assert_same_bits(got, want):
    assert got.shape == want.shape
    nan = np.isnan(want)
    gb, wb = got.view(np.uint32), want.view(np.uint32)
    assert np.array_equal(gb[~nan], wb[~nan])
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(gb[nan] >> 31, wb[nan] >> 31)


def every_f16():
    return np.arange(65536, dtype=np.uint16).view(np.float16)


def test_numpy_file(dequant_cli, tmp_path):
    rng = np.random.default_rng(7)
    tensors = {
        "model.embed.weight": rng.standard_normal((7, 5)).astype(np.float32),
        "layers.0.attn.q": rng.standard_normal((3, 4, 2)).astype(np.float32),
        "f16.all": every_f16().reshape(256, 256),
        "scalar": np.array(2.5, dtype=np.float32),
        "odd": rng.standard_normal(3).astype(np.float16),
    }
    path = tmp_path / "np.safetensors"
    save_file(tensors, str(path), metadata={"format": "np"})
    for name, x in tensors.items():
        got = read_back(dequant_cli, path, name, tmp_path)
        assert_same_bits(got, x.astype(np.float32).ravel())


def write_safetensors(path, entries, metadata=None):
    """entries: list of (name, dtype string, shape, raw bytes); writes them in order."""
    header, data, off = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


def test_bf16_file(dequant_cli, tmp_path):
    bits = np.arange(65536, dtype=np.uint16)
    rng = np.random.default_rng(3)
    f = rng.standard_normal(10).astype(np.float32)
    path = tmp_path / "bf16.safetensors"
    write_safetensors(path, [
        ("bf16.all", "BF16", (65536,), bits.astype("<u2").tobytes()),
        ("f32", "F32", (2, 5), f.astype("<f4").tobytes()),
        ("ids", "I64", (3,), np.arange(3, dtype="<i8").tobytes()),
    ], metadata={"format": "pt"})
    want = (bits.astype(np.uint32) << 16).view(np.float32)
    assert_same_bits(read_back(dequant_cli, path, "bf16.all", tmp_path), want)
    assert_same_bits(read_back(dequant_cli, path, "f32", tmp_path), f)
    # I64 is read but does not convert.
    r = run_cli(dequant_cli, path, "ids", tmp_path / "x.f32")
    assert r.returncode != 0 and "I64" in r.stderr and "unsupported" in r.stderr


def test_bad_files(dequant_cli, tmp_path):
    x = np.arange(6, dtype=np.float32)
    good = tmp_path / "good.safetensors"
    write_safetensors(good, [("x", "F32", (6,), x.tobytes())])
    assert_same_bits(read_back(dequant_cli, good, "x", tmp_path), x)
    data = good.read_bytes()

    def refused(raw, *words):
        p = tmp_path / "bad.safetensors"
        p.write_bytes(raw)
        r = run_cli(dequant_cli, p, "x", tmp_path / "bad.f32")
        assert r.returncode != 0, raw[:80]
        for w in words:
            assert w in r.stderr, (w, r.stderr)

    refused(data[:-1], "syntax", '"x"', "run past the data buffer")
    refused(data + b"\0", "syntax", "end at byte 24")
    refused(struct.pack("<Q", 1 << 40) + data[8:], "syntax", "past the end")
    bad = tmp_path / "b.safetensors"
    write_safetensors(bad, [("x", "F32", (7,), x.tobytes())])
    refused(bad.read_bytes(), "syntax", '"x"', "take 28 bytes")
    r = run_cli(dequant_cli, good, "y", tmp_path / "y.f32")
    assert r.returncode != 0 and '"y"' in r.stderr
