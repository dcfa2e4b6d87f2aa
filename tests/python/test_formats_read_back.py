"""Reading back every format sparkulator writes (FP8_DYNAMIC, FP8_BLOCK, W8A8/INT8, NVFP4A16, MXFP4A16,
MXFP8A16, W4AFP8), against compressed-tensors 0.19 itself:

- `dequantize` equals compressed-tensors' decompression BYTE FOR BYTE, tensor by tensor, dtype included:
  each quantized module's stored tensors go through the compressor of the checkpoint's format with the
  QuantizationScheme parsed from our config.json, exactly what ModelCompressor.decompress_model runs on
  every module (compressors/base.py decompress_module -> cls.decompress(state_dict, scheme)). The
  checkpoints are test_formats_interop.py's (the rounding edges of every format, BF16/F16/F32, and the
  one sharded so that q/gate and k/v/up sit in different files, where NVFP4's global scale is shared
  across the shards).
- `compare` reports the per-layer error torch computes between the source weights and that same
  decompression (relative Frobenius error, SNR, cosine, max abs error, output error on compare's own
  random inputs, reproduced here).
- `inspect` counts and lists every format's quantized modules, and its sizes are the bytes on disk and
  the bytes of the dense checkpoint `dequantize` writes.
"""
import json
import math
import struct

import pytest
import torch

import references
from conftest import load_dir
from formats_sources import CHECKPOINTS, PRESETS
PROJECTIONS = 7  # q, k, v, o, gate, up, down


def projections(preset: str) -> int:
    """The projections quantized: FP8_BLOCK keeps q/k/v dense here (k_proj's 192 rows break vLLM's
    fused block rule; test_formats_interop.py says more)."""
    return 4 if preset == "FP8_BLOCK" else PROJECTIONS


@pytest.fixture(scope="module")
def sources(format_sources):
    """checkpoint -> its folder: the session's (conftest.py format_sources)."""
    return format_sources


@pytest.fixture(scope="module")
def quantized(format_quantized):
    """(checkpoint, preset) -> sparkulator's quantized folder: the session's, which
    test_formats_interop.py compares with model_free_ptq (conftest.py format_quantized)."""
    return format_quantized


def reference_decompression(q_dir):
    """module -> the weight compressed-tensors decompresses from our stored tensors
    (references.decompress_checkpoint, cached by the checkpoint's content)."""
    return references.ct_decompression(q_dir)


def raw(t):
    return t.contiguous().view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize("ckpt", CHECKPOINTS)
@pytest.mark.parametrize("preset", PRESETS)
def test_dequantize_equals_compressed_tensors_byte_for_byte(sources, quantized, spk, tmp_path, ckpt,
                                                           preset):
    q = quantized[ckpt, preset]
    d = tmp_path / "dense"
    r = spk("dequantize", q, d, "--json", expect=None)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dequantized_modules"] == projections(preset)
    reference = reference_decompression(q)
    assert len(reference) == projections(preset)
    ours, source = load_dir(d), load_dir(sources[ckpt])
    assert sorted(ours) == sorted(source)  # every aux tensor gone, every dense one kept
    assert "quantization_config" not in json.loads((d / "config.json").read_text())
    for name, tensor in ours.items():
        module = name.removesuffix(".weight")
        want = reference.get(module, source[name])
        assert (tensor.dtype, tensor.shape) == (want.dtype, want.shape), name
        if raw(tensor) != raw(want):
            differ = (tensor.view(torch.uint8) != want.view(torch.uint8)).nonzero()[:5].tolist()
            pytest.fail(f"{name}: bytes differ from compressed-tensors' decompression at {differ}")
    if ckpt.endswith("sharded"):
        assert sorted(p.name for p in d.glob("*.safetensors")) == sorted(
            p.name for p in q.glob("*.safetensors"))


def compare_inputs(module: str, samples: int, cols: int, seed: int = 1) -> torch.Tensor:
    """compare's random inputs: splitmix64 seeded with seed ^ fnv1a(module), Box-Muller, float32."""
    mask = (1 << 64) - 1
    h = 0xCBF29CE484222325
    for c in module.encode():
        h = ((h ^ c) * 0x100000001B3) & mask
    state = seed ^ h

    def uniform():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        return ((z >> 11) + 1) * 2.0**-53

    n = samples * cols
    out = []
    while len(out) < n:
        r, theta = math.sqrt(-2.0 * math.log(uniform())), 2.0 * math.pi * uniform()
        out += [r * math.cos(theta), r * math.sin(theta)]
    x = [struct.unpack("f", struct.pack("f", v))[0] for v in out[:n]]
    return torch.tensor(x, dtype=torch.float64).reshape(samples, cols)


@pytest.mark.parametrize("ckpt", ["bf16", "f16", "bf16-sharded"])
@pytest.mark.parametrize("preset", PRESETS)
def test_compare_reports_the_error_of_compressed_tensors_decompression(sources, quantized, spk,
                                                                      ckpt, preset):
    q = quantized[ckpt, preset]
    r = spk("compare", sources[ckpt], q, "--json", "--samples", "2", expect=None)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    layers = {l["module"]: l for l in report["layers"]}
    reference, source = reference_decompression(q), load_dir(sources[ckpt])
    assert sorted(layers) == sorted(reference)
    for module, dq in reference.items():
        w, wq = source[module + ".weight"].double(), dq.double()
        e = w - wq
        got = layers[module]
        assert got["rel_fro"] == pytest.approx((e.norm() / w.norm()).item(), rel=1e-9), module
        assert got["snr_db"] == pytest.approx(
            10 * math.log10((w.square().sum() / e.square().sum()).item()), rel=1e-9), module
        assert got["cosine"] == pytest.approx(
            ((w * wq).sum() / (w.norm() * wq.norm())).item(), rel=1e-9), module
        assert got["max_abs"] == pytest.approx(e.abs().max().item(), rel=1e-12), module
        x = compare_inputs(module, 2, w.shape[1])
        y, yq = x @ w.T, x @ wq.T
        assert got["output_rel_error"] == pytest.approx(
            ((y - yq).norm() / y.norm()).item(), rel=1e-6), module


@pytest.mark.parametrize("preset", PRESETS)
def test_inspect_counts_lists_and_sizes_every_quantized_module(quantized, spk, tmp_path, preset):
    q = quantized["bf16-sharded", preset]
    r = spk("inspect", q, "--json", expect=None)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    stored = load_dir(q)
    assert report["quantized_modules"] == projections(preset)
    listed = {m["module"]: m for m in report["modules"]}
    assert sorted(listed) == sorted(n.rsplit(".", 1)[0] for n in stored
                                    if n.endswith(".weight_scale"))
    d = tmp_path / "dense"
    assert spk("dequantize", q, d, expect=None).returncode == 0
    dense = load_dir(d)
    for module, m in listed.items():
        assert m["shape"] == list(dense[module + ".weight"].shape)
        assert m["bytes"] == sum(t.nbytes for n, t in stored.items() if n.startswith(module + "."))
        assert m["dense_bytes"] == dense[module + ".weight"].nbytes
    actions = {t["name"]: t["action"] for t in report["tensors"]}
    assert sum(a == "quantized" for a in actions.values()) == projections(preset)
    assert report["size"]["bytes_after"] == sum(t.nbytes for t in stored.values())
    assert report["size"]["bytes_before"] == sum(t.nbytes for t in dense.values())

