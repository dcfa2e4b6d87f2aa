"""Bad input to `sparkulator quantize`: every case gets a message naming the file (and the tensor where
there is one), exit code 2 (3 for I/O), no crash, and nothing at DST or beside it."""

import json
import math
import os
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file


def leftovers(dst: Path):
    """Everything quantize may have left: DST itself and temporary folders beside it."""
    return sorted(p.name for p in dst.parent.iterdir()
                  if p.name == dst.name or p.name.startswith(f".{dst.name}.tmp"))


def expect_refusal(spk, src, dst, *needles, code=2, flags=()):
    proc = spk("quantize", src, dst, *flags, expect=code)
    for needle in needles:
        assert needle in proc.stderr, f"{needle!r} not in: {proc.stderr}"
    assert leftovers(dst) == [], leftovers(dst)
    return proc


@pytest.fixture
def llm(spk, tmp_path):
    src = tmp_path / "src"
    spk("example", src, "--family", "llm", "--layers", "1")
    return src


def raw_safetensors(path: Path, header: dict, data: bytes, pad=True):
    body = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        body += b" " * (-len(body) % 8)
    path.write_bytes(struct.pack("<Q", len(body)) + body + data)


def test_missing_source_and_config(spk, tmp_path):
    expect_refusal(spk, tmp_path / "nope", tmp_path / "q", "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    expect_refusal(spk, empty, tmp_path / "q", "config.json")


def test_malformed_config_json(spk, llm, tmp_path):
    (llm / "config.json").write_text("{ not json")
    expect_refusal(spk, llm, tmp_path / "q", "config.json", "JSON")


def test_a_source_quantized_in_a_format_not_decoded_is_refused(spk, llm, tmp_path):
    # compressed-tensors and FP8 block sources are decoded (test_quantized_sources.py); GPTQ not yet.
    config = json.loads((llm / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    (llm / "config.json").write_text(json.dumps(config))
    expect_refusal(spk, llm, tmp_path / "q", "already quantized", "quant_method gptq",
                   "compressed-tensors")


@pytest.mark.parametrize("case", ["short", "huge_header", "beyond_file", "not_json", "gap",
                                  "overlap", "size_mismatch", "trailing", "unknown_dtype",
                                  "duplicate", "metadata_not_string"])
def test_malformed_safetensors(spk, tmp_path, case):
    src = tmp_path / "src"
    spk("example", src, "--family", "llm", "--layers", "1")
    f = src / "model.safetensors"
    t = {"__metadata__": {"format": "pt"},
         "a.weight": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]},
         "b.weight": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [8, 16]}}
    data = bytes(16)
    if case == "short":
        f.write_bytes(b"\x01\x02")
    elif case == "huge_header":
        f.write_bytes(struct.pack("<Q", 200_000_000) + b"{}")
    elif case == "beyond_file":
        f.write_bytes(struct.pack("<Q", 1000) + b"{}")
    elif case == "not_json":
        f.write_bytes(struct.pack("<Q", 8) + b"not json")
    elif case == "gap":
        t["b.weight"]["data_offsets"] = [10, 18]
        raw_safetensors(f, t, bytes(18))
    elif case == "overlap":
        t["b.weight"]["data_offsets"] = [4, 12]
        raw_safetensors(f, t, bytes(12))
    elif case == "size_mismatch":
        t["b.weight"]["shape"] = [3, 3]
        raw_safetensors(f, t, data)
    elif case == "trailing":
        raw_safetensors(f, t, data + b"xx")
    elif case == "unknown_dtype":
        t["b.weight"]["dtype"] = "Q4"
        raw_safetensors(f, t, data)
    elif case == "duplicate":
        body = (b'{"a.weight":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},'
                b'"a.weight":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}}')
        f.write_bytes(struct.pack("<Q", len(body)) + body + bytes(8))
    elif case == "metadata_not_string":
        t["__metadata__"] = {"format": 1}
        raw_safetensors(f, t, data)
    expect_refusal(spk, src, tmp_path / "q", "model.safetensors")


def test_sharded_index_problems(spk, tmp_path):
    src = tmp_path / "src"
    spk("example", src, "--family", "llm", "--layers", "1", "--shards", "2")
    index_path = src / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    name = next(iter(index["weight_map"]))
    escaped = dict(index)
    escaped["weight_map"] = dict(index["weight_map"], **{name: "../evil.safetensors"})
    index_path.write_text(json.dumps(escaped))
    expect_refusal(spk, src, tmp_path / "q", "../evil.safetensors")
    index_path.write_text(json.dumps(index))
    os.remove(src / "model-00002-of-00002.safetensors")
    expect_refusal(spk, src, tmp_path / "q", "model-00002-of-00002.safetensors")


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_weight_names_the_tensor(spk, llm, tmp_path, bad):
    tensors = load_file(str(llm / "model.safetensors"))
    w = tensors["model.layers.0.mlp.down_proj.weight"].clone()
    w[3, 5] = bad
    tensors["model.layers.0.mlp.down_proj.weight"] = w
    save_file(tensors, str(llm / "model.safetensors"), metadata={"format": "pt"})
    expect_refusal(spk, llm, tmp_path / "q", "model.layers.0.mlp.down_proj.weight", "row 3")


def test_existing_destination_needs_force(spk, llm, tmp_path):
    dst = tmp_path / "q"
    dst.mkdir()
    (dst / "keep.txt").write_text("mine")
    proc = spk("quantize", llm, dst, expect=2)
    assert "--force" in proc.stderr
    assert (dst / "keep.txt").read_text() == "mine"
    spk("quantize", llm, dst, "--force")
    assert not (dst / "keep.txt").exists() and (dst / "config.json").exists()
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


@pytest.mark.parametrize("flags,needle", [
    (("--scheme", "w9a16"), "w9a16"),
    (("--group-size", "100"), "--group-size"),
    (("--preset", "qwen"), "qwen"),
    (("--ignore", "re:.*nothing$"), "matches no Linear"),
    (("--ignore", "re:(unclosed"), "(unclosed"),
])
def test_usage_errors(spk, llm, tmp_path, flags, needle):
    expect_refusal(spk, llm, tmp_path / "q", needle, flags=flags)


def test_ctrl_c_leaves_nothing_behind(spk, spk_path, tmp_path):
    src = tmp_path / "src"
    # Two layers (~130M weights) keep one thread busy for seconds after the .tmp folder appears,
    # so the interrupt lands mid-run; the sanitizer build spends most of this test writing them.
    spk("example", src, "--family", "llm", "--hidden", "2048", "--intermediate", "8192",
        "--layers", "2", "--vocab", "256")
    dst = tmp_path / "q"
    proc = subprocess.Popen([spk_path, "quantize", str(src), str(dst), "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Wait until the temporary output exists, then interrupt.
    deadline = time.time() + 20
    while time.time() < deadline and not any(".tmp" in p.name for p in tmp_path.iterdir()):
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("quantize finished before the interrupt landed")
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert leftovers(dst) == []
