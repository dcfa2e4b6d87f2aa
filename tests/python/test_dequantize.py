"""`sparkulator dequantize`: quantize then dequantize gives back, bit for bit, what compressed-tensors'
own decompression gives from the source weights, in the source dtype; config.json loses only its
quantization_config; every other tensor and file is carried over unchanged; check passes on the result.
"""

import json

import pytest
import torch

from test_quant_interop import reference
from conftest import load_dir

# Each scheme at a group size some vLLM kernel builds: quantize keeps dense a module no kernel
# builds, and w8a16-asym's only CUDA kernel (Machete) refuses group 32.
CASES = [("w4a16", 128, "BF16"), ("w4a16-asym", 32, "BF16"), ("w8a16", -1, "F16"),
         ("w8a16-asym", 64, "F32")]



@pytest.mark.parametrize("scheme,group,dtype", CASES, ids=lambda c: str(c))
def test_dequantize_reproduces_reference_dequantization(spk, tmp_path, scheme, group, dtype):
    src, q, dq = tmp_path / "src", tmp_path / "q", tmp_path / "dq"
    spk("example", src, "--family", "dflash", "--dtype", dtype, "--shards", "2")
    spk("quantize", src, q, "--scheme", scheme, "--group-size", group)
    summary = json.loads(spk("dequantize", q, dq, "--json").stdout)
    assert summary["dequantized_modules"] == 9 and summary["shards"] == 2
    source, ours, packed = load_dir(src), load_dir(dq), load_dir(q)
    assert sorted(ours) == sorted(source)  # same tensor names as the dense source
    bits, symmetric = int(scheme[1]), not scheme.endswith("-asym")
    for name, w in source.items():
        module = name[: -len(".weight")]
        if f"{module}.weight_packed" not in packed:
            assert torch.equal(ours[name], w), name  # copied as it was
            continue
        *_, decompressed, _ = reference(w, bits, symmetric, group)
        assert ours[name].dtype == w.dtype
        assert torch.equal(ours[name], decompressed), name
    cfg_src = json.loads((src / "config.json").read_text())
    cfg_dq = json.loads((dq / "config.json").read_text())
    assert "quantization_config" not in cfg_dq and cfg_dq == cfg_src
    idx = json.loads((dq / "model.safetensors.index.json").read_text())
    assert set(idx["weight_map"]) == set(source)
    assert (dq / "README.md").read_bytes() == (src / "README.md").read_bytes()
    report = json.loads(spk("check", dq, "--json").stdout)
    assert report["ok"] and report["scheme"] == "dense"


def test_dequantize_refuses_dense_input_and_existing_output(spk, tmp_path):
    src = tmp_path / "src"
    spk("example", src, "--family", "llm")
    proc = spk("dequantize", src, tmp_path / "out", expect=2)
    assert "already dense" in proc.stderr
    q = tmp_path / "q"
    spk("quantize", src, q)
    spk("dequantize", q, tmp_path / "out")
    before = (tmp_path / "out" / "model.safetensors").read_bytes()
    proc = spk("dequantize", q, tmp_path / "out", expect=2)
    assert "out" in proc.stderr
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == before


def test_dequantize_restores_a_speculators_config(spk, tmp_path):
    src, q, dq = tmp_path / "src", tmp_path / "q", tmp_path / "dq"
    spk("example", src, "--family", "eagle3-speculators")
    spk("quantize", src, q)
    spk("dequantize", q, dq)
    assert json.loads((dq / "config.json").read_text()) == json.loads(
        (src / "config.json").read_text())


def test_dequantize_threads_and_no_fsync_write_the_same_bytes(spk, tmp_path):
    """--threads and --no-fsync (the CheckpointWriter's) change how the output is written, never what."""
    src, q = tmp_path / "src", tmp_path / "q"
    spk("example", src, "--family", "dflash", "--shards", "2")
    spk("quantize", src, q)
    spk("dequantize", q, tmp_path / "one", "--threads", "1")
    spk("dequantize", q, tmp_path / "three", "--threads", "3", "--no-fsync")
    one = {p.name: p.read_bytes() for p in (tmp_path / "one").iterdir()}
    three = {p.name: p.read_bytes() for p in (tmp_path / "three").iterdir()}
    assert len(one) >= 4 and one == three  # two shards, index, config, README, ...
    assert not list(tmp_path.glob(".three.tmp-*")), "the temporary folder must be renamed away"
    proc = spk("dequantize", q, tmp_path / "bad", "--threads", "x", expect=2)
    assert "--threads" in proc.stderr


def test_dequantized_fp4_config_records_the_dtype_the_reference_records(spk, tmp_path):
    """compressed-tensors' decompressor returns BF16 for NVFP4 (MXFP4, MXFP8) from an F16 source, and
    transformers' save_pretrained of the decompressed model still records "float16": dequantize
    keeps that dtype in config.json too, writes the modules in BF16 as the reference does, and says
    so in a warning instead of leaving the mix unexplained."""
    from transformers import AutoModelForCausalLM
    from transformers.utils.quantization_config import CompressedTensorsConfig
    src, q, dq, hf = tmp_path / "src", tmp_path / "q", tmp_path / "dq", tmp_path / "hf"
    spk("example", src, "--family", "llm", "--dtype", "F16")
    spk("quantize", src, q, "--scheme", "nvfp4a16", "--no-fsync")
    summary = json.loads(spk("dequantize", q, dq, "--json").stdout)
    model = AutoModelForCausalLM.from_pretrained(
        str(q), quantization_config=CompressedTensorsConfig(run_compressed=False))
    model.save_pretrained(str(hf))
    reference = json.loads((hf / "config.json").read_text())
    ours = json.loads((dq / "config.json").read_text())
    assert ours["torch_dtype"] == reference.get("dtype", reference.get("torch_dtype")) == "float16"
    tensors, source, packed = load_dir(dq), load_dir(src), load_dir(q)
    dequantized = [n for n in tensors if f"{n[:-len('.weight')]}.weight_packed" in packed]
    assert dequantized and all(tensors[n].dtype == torch.bfloat16 for n in dequantized)
    assert all(tensors[n].dtype == torch.float16 for n in tensors if n not in dequantized)
    assert all(model.state_dict()[n].dtype == torch.bfloat16 for n in dequantized)
    warning = [w for w in summary["warnings"] if "torch_dtype float16" in w]
    assert len(warning) == 1 and f"{len(dequantized)} dequantized modules are BF16" in warning[0]
    assert sorted(tensors) == sorted(source)
