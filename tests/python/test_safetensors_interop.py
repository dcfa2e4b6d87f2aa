"""Interop between our safetensors reader/writer (via the st_rewrite test tool) and the real Python
`safetensors` package (which wraps the Rust reference crate).

(a) files written by Python are reproduced byte for byte by `st_rewrite --sort-like-reference`;
(b) Python loads our rewrites (in the source's order and in reference order) with identical tensors;
(c) malformed files are rejected by our reader with a non-zero exit and a message naming the file.

st_rewrite is found by the build_file fixture (conftest.py) in the build folder ($SPK_BUILD_DIR, default <repo>/build); a
missing st_rewrite fails every test here.
"""

import json
import struct
import subprocess

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.numpy import save_file as np_save_file
from safetensors.torch import load_file, save_file



@pytest.fixture(scope="module")
def st_rewrite(build_file):
    return build_file("st_rewrite")


def rewrite(st_rewrite, src, dst, *flags):
    return subprocess.run([st_rewrite, *flags, str(src), str(dst)], capture_output=True,
                          text=True, timeout=60)


def many_tensors():
    """Tensors of many dtypes and shapes, including rank-0 and zero-size ones."""
    g = torch.Generator().manual_seed(0)
    t = {
        "model.layers.0.mlp.up_proj.weight": torch.randn(16, 8, generator=g).to(torch.bfloat16),
        "model.layers.0.mlp.down_proj.weight": torch.randn(8, 16, generator=g).to(torch.bfloat16),
        "model.norm.weight": torch.randn(8, generator=g, dtype=torch.float32),
        "half": torch.randn(3, 5, generator=g).to(torch.float16),
        "double": torch.randn(2, 2, generator=g, dtype=torch.float64),
        "scalar": torch.tensor(3.5, dtype=torch.float32),
        "scalar_i64": torch.tensor(-7, dtype=torch.int64),
        "empty": torch.zeros(0, 4, dtype=torch.bfloat16),
        "empty_u8": torch.zeros(0, dtype=torch.uint8),
        "i8": torch.randint(-128, 127, (5,), generator=g, dtype=torch.int8),
        "u8": torch.randint(0, 255, (7,), generator=g, dtype=torch.uint8),
        "i16": torch.randint(-1000, 1000, (3, 3), generator=g, dtype=torch.int16),
        "i32": torch.randint(-(2**31), 2**31 - 1, (4, 2), generator=g, dtype=torch.int32),
        "bool": torch.tensor([True, False, True]),
        "fp8_e4m3": torch.randn(6, generator=g).to(torch.float8_e4m3fn),
        "fp8_e5m2": torch.randn(6, generator=g).to(torch.float8_e5m2),
        "u16": torch.tensor([1, 65535], dtype=torch.uint16),
        "u32": torch.tensor([1, 2**32 - 1], dtype=torch.uint32),
        "u64": torch.tensor([1, 2**63], dtype=torch.uint64),
        "c64": torch.randn(3, generator=g, dtype=torch.complex64),
        "fp8_e8m0": torch.randint(0, 255, (4,), generator=g, dtype=torch.uint8).view(
            torch.float8_e8m0fnu),
        "fp8_e4m3fnuz": torch.randn(3, generator=g).to(torch.float8_e4m3fnuz),
        "fp8_e5m2fnuz": torch.randn(3, generator=g).to(torch.float8_e5m2fnuz),
        # Two FP4 values per byte; the file holds dtype F4 with the last dimension doubled.
        "fp4": torch.randint(0, 255, (2, 3), generator=g, dtype=torch.uint8).view(
            torch.float4_e2m1fn_x2),
        "name with \"quotes\" \\ and é": torch.ones(2, dtype=torch.float32),
    }
    return t


@pytest.mark.parametrize("metadata", [None, {"format": "pt"}])
def test_rewrite_reproduces_python_bytes(st_rewrite, tmp_path, metadata):
    src = tmp_path / "src.safetensors"
    save_file(many_tensors(), str(src), metadata=metadata)
    out = tmp_path / "out.safetensors"
    r = rewrite(st_rewrite, src, out, "--sort-like-reference")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == src.read_bytes()


def test_rewrite_reproduces_numpy_writer_bytes(st_rewrite, tmp_path):
    src = tmp_path / "src.safetensors"
    np_save_file({"b": np.arange(6, dtype=np.float32).reshape(2, 3), "a": np.zeros((0,), np.int16),
                  "c": np.array(1.5, dtype=np.float64)}, str(src), metadata={"format": "np"})
    out = tmp_path / "out.safetensors"
    assert rewrite(st_rewrite, src, out, "--sort-like-reference").returncode == 0
    assert out.read_bytes() == src.read_bytes()


@pytest.mark.parametrize("flags", [[], ["--sort-like-reference"]])
def test_python_loads_our_rewrite(st_rewrite, tmp_path, flags):
    tensors = many_tensors()
    src = tmp_path / "src.safetensors"
    save_file(tensors, str(src), metadata={"format": "pt"})
    out = tmp_path / "out.safetensors"
    r = rewrite(st_rewrite, src, out, *flags)
    assert r.returncode == 0, r.stderr
    loaded = load_file(str(out))
    assert loaded.keys() == tensors.keys()
    for name, expected in tensors.items():
        got = loaded[name]
        assert got.dtype == expected.dtype and got.shape == expected.shape, name
        assert got.reshape(-1).view(torch.uint8).tolist() == \
            expected.reshape(-1).view(torch.uint8).tolist(), name
    with safe_open(str(out), "pt") as f:
        assert f.metadata() == {"format": "pt"}
    # Data buffer 8-byte aligned.
    (n,) = struct.unpack("<Q", out.read_bytes()[:8])
    assert n % 8 == 0


def test_rewrite_keeps_source_order_without_flag(st_rewrite, tmp_path):
    # A file whose data order is not the reference order (names descending, one dtype).
    header = {"__metadata__": {"format": "pt"},
              "z": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
              "a": {"dtype": "U8", "shape": [3], "data_offsets": [2, 5]}}
    src = tmp_path / "src.safetensors"
    src.write_bytes(craft(json.dumps(header, separators=(",", ":")), b"zzaaa"))
    out = tmp_path / "out.safetensors"
    assert rewrite(st_rewrite, src, out).returncode == 0
    body = out.read_bytes()
    (n,) = struct.unpack("<Q", body[:8])
    assert list(json.loads(body[8:8 + n]).keys()) == ["__metadata__", "z", "a"]
    assert body[8 + n:] == b"zzaaa"


def craft(header, data=b"", length=None):
    raw = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


MALFORMED = {
    "too_short": (b"\x01\x02\x03", "too short"),
    "header_too_large": (craft("{}", length=100_000_001), "larger than the limit"),
    "header_past_end": (craft("{}", length=64), "runs past the end"),
    "not_utf8": (craft(b'{"__metadata__":{"a":"\xff"}}'), "UTF-8"),
    "not_json": (craft('{"a":'), "invalid JSON"),
    "not_object": (craft("[]"), "JSON object"),
    "metadata_not_string": (craft('{"__metadata__":{"format":1}}'), "__metadata__"),
    "unknown_dtype": (craft(json.dumps({"w": entry("Q7", [1], 0, 1)}), b"x"), "unknown dtype"),
    "missing_field": (craft('{"w":{"dtype":"U8","shape":[1]}}', b"x"), "data_offsets"),
    "gap": (craft(json.dumps({"w": entry("U8", [1], 1, 2)}), b"xx"), "gap"),
    "overlap": (craft(json.dumps({"a": entry("U8", [2], 0, 2), "b": entry("U8", [2], 1, 3)}),
                      b"xxx"), "overlap"),
    "size_mismatch": (craft(json.dumps({"w": entry("BF16", [4, 4], 0, 10)}), b"x" * 10),
                      "needs 32"),
    "overflow": (craft(json.dumps({"w": entry("F32", [2**32, 2**32], 0, 0)})), "overflow"),
    "sub_byte": (craft(json.dumps({"w": entry("F4", [3], 0, 2)}), b"xx"), "byte boundary"),
    "trailing": (craft(json.dumps({"w": entry("U8", [1], 0, 1)}), b"xy"), "unexpected bytes"),
    "truncated": (craft(json.dumps({"w": entry("U8", [4], 0, 4)}), b"xy"), "truncated"),
    "duplicate": (craft('{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                        '"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
                  "appears twice"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_files_are_rejected(st_rewrite, tmp_path, case):
    data, expected = MALFORMED[case]
    src = tmp_path / f"{case}.safetensors"
    src.write_bytes(data)
    r = rewrite(st_rewrite, src, tmp_path / "out.safetensors")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert str(src) in r.stderr
    assert expected in r.stderr
    assert not (tmp_path / "out.safetensors").exists()


def test_python_also_rejects_what_both_must_reject(tmp_path):
    # Cross-check a few cases against the reference itself, so our expectations are not invented.
    for case in ["gap", "overlap", "size_mismatch", "sub_byte", "trailing", "not_utf8"]:
        src = tmp_path / f"{case}.safetensors"
        src.write_bytes(MALFORMED[case][0])
        with pytest.raises(Exception):
            with safe_open(str(src), "np") as f:
                list(f.keys())
