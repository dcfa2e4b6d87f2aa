"""Interop: sparkulator's scalar RTN quantizer (src/quant/rtn.h, driven through quant_tool) must agree
BIT FOR BIT with compressed-tensors, the library vLLM and llm-compressor use.

Reference path, all from the installed compressed-tensors (the release tests/requirements.txt pins,
which must equal sparkulator's kCompressedTensorsVersion: test_compressed_tensors_is_the_version_we_write):
  scale, zero point: quantization.utils.calculate_qparams on per-group amin/amax of the weight (what
                     llm-compressor's "minmax" observer feeds it);
  packed words:      compressors.pack_quantized.PackedQuantizationCompressor.compress (forward.quantize
                     + pack_to_int32, zero points packed along dim 0);
  dequantized:       PackedQuantizationCompressor.decompress, and lifecycle.forward.fake_quantize.
Also: pack_to_int32 for every width 1..8, and FloatToBF16/FloatToF16 against torch's `.to(dtype)`.

quant_tool is found by the build_file fixture (conftest.py) in the build folder ($SPK_BUILD_DIR, default <repo>/build); a
missing quant_tool fails every test here.
"""

import importlib.metadata
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
from compressed_tensors.quantization.lifecycle.forward import fake_quantize
from compressed_tensors.quantization.utils import calculate_qparams

from conftest import REPO

REQUIREMENTS = REPO / "tests" / "requirements.txt"

DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
INT_VIEW = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}
ROWS_PER_PATTERN = 4
COLS = 256


@pytest.fixture(scope="module")
def tool(build_file):
    return build_file("src/quant/quant_tool")


def run_tool(tool, *args):
    proc = subprocess.run([tool, *map(str, args)], capture_output=True, text=True)
    assert proc.returncode == 0, f"quant_tool {' '.join(map(str, args))} failed: {proc.stderr}"


def to_bytes(t: torch.Tensor) -> bytes:
    if t.dtype in INT_VIEW:
        t = t.view(INT_VIEW[t.dtype])
    return t.contiguous().numpy().tobytes()


def from_file(path: Path, dtype: torch.dtype, shape) -> torch.Tensor:
    return torch.frombuffer(bytearray(path.read_bytes()), dtype=dtype).reshape(shape)


def smallest_subnormal(dtype):
    return {torch.bfloat16: 2.0**-133, torch.float16: 2.0**-24, torch.float32: 2.0**-149}[dtype]


def adversarial_weight(dtype: torch.dtype) -> torch.Tensor:
    """Rows of patterns that stress every rounding step; each pattern fills ROWS_PER_PATTERN rows of
    COLS columns (so groups of 32, 64, 128 and whole rows all see it)."""
    g = torch.Generator().manual_seed(1234)
    r, c = ROWS_PER_PATTERN, COLS
    cols = torch.arange(c, dtype=torch.float64)
    patterns = []

    patterns.append(torch.randn(r, c, generator=g, dtype=torch.float64) * 0.02)  # plain normal
    outliers = torch.randn(r, c, generator=g, dtype=torch.float64) * 0.02
    outliers[:, [3, 77, 130, 200]] *= 150.0  # outlier columns
    patterns.append(outliers)
    zeros = torch.randn(r, c, generator=g, dtype=torch.float64)
    zeros[:, :128] = 0.0  # all-zero groups at every group size
    zeros[0, :] = 0.0  # an all-zero row (channel-wise all-zero)
    patterns.append(zeros)
    # Exact ties for 4-bit symmetric: scale 2^-6 (absmax 7.5 * 2^-6 at the start of every group of
    # 32) and values (k + 0.5) * 2^-6.
    ties4 = ((cols % 16) - 8 + 0.5).repeat(r, 1) * 2.0**-6
    ties4[:, ::32] = 7.5 * 2.0**-6
    ties4[1] = -ties4[1]
    ties4[2, ::32] = -7.5 * 2.0**-6
    patterns.append(ties4)
    # Exact ties for 8-bit symmetric: absmax 127.5 * 2^-6, values (k + 0.5) * 2^-6.
    ties8 = ((cols % 256) - 128 + 0.5).repeat(r, 1) * 2.0**-6
    ties8[:, ::32] = 127.5 * 2.0**-6
    ties8[1] = -ties8[1]
    patterns.append(ties8)
    # +absmax only, -absmax only, both.
    pm = torch.randn(r, c, generator=g, dtype=torch.float64) * 0.1
    pm[0, ::32] = 1.0
    pm[1, ::32] = -1.0
    pm[2, ::32] = 1.0
    pm[2, 1::32] = -1.0
    pm[3, ::16] = -0.75
    patterns.append(pm)
    # Constant groups, negative-only and positive-only groups.
    const = torch.empty(r, c, dtype=torch.float64)
    const[0] = 0.3
    const[1] = -0.3
    const[2] = -torch.rand(c, generator=g, dtype=torch.float64)
    const[3] = torch.rand(c, generator=g, dtype=torch.float64) + 0.5
    patterns.append(const)
    # Subnormals of the dtype (and a group whose range is a single smallest subnormal, so that the
    # asymmetric scale underflows to 0 and the zero point to -inf/NaN territory).
    tiny = smallest_subnormal(dtype)
    sub = torch.randint(-300, 300, (r, c), generator=g).to(torch.float64) * tiny
    sub[1] = torch.randint(-3, 4, (c,), generator=g).to(torch.float64) * tiny
    sub[2] = 0.0
    sub[2, ::32] = -tiny
    sub[3] = 0.0
    sub[3, ::32] = tiny
    patterns.append(sub)
    # Large magnitudes (safe for F16: max - min stays below 65504) and coarse integer grids that put
    # asymmetric quotients on ties.
    big = torch.randn(r, c, generator=g, dtype=torch.float64) * 8000.0
    big[1] = torch.randint(-30, 31, (c,), generator=g).to(torch.float64)
    big[2] = torch.randint(0, 16, (c,), generator=g).to(torch.float64) * 0.25 - 1.0
    big[3] = torch.randint(-128, 128, (c,), generator=g).to(torch.float64) / 3.0
    patterns.append(big)

    return torch.cat(patterns).to(dtype)


def reference(weight: torch.Tensor, bits: int, symmetric: bool, group: int):
    if group > 0:
        args = QuantizationArgs(num_bits=bits, type="int", symmetric=symmetric, strategy="group",
                                group_size=group)
        grouped = weight.reshape(weight.shape[0], -1, group)
        mn, mx = grouped.amin(dim=-1), grouped.amax(dim=-1)
    else:
        args = QuantizationArgs(num_bits=bits, type="int", symmetric=symmetric, strategy="channel")
        mn, mx = weight.amin(dim=1, keepdim=True), weight.amax(dim=1, keepdim=True)
    scale, zero_point = calculate_qparams(mn, mx, args)
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    state = {"weight": weight, "weight_scale": scale, "weight_zero_point": zero_point}
    compressed = PackedQuantizationCompressor.compress(state, scheme)
    decompressed = PackedQuantizationCompressor.decompress(dict(compressed), scheme)
    fake = fake_quantize(weight, scale, zero_point, args)
    return args, scale, zero_point, compressed, decompressed["weight"], fake


def assert_same_bits(ours: torch.Tensor, theirs: torch.Tensor, what: str):
    assert ours.shape == theirs.shape, f"{what}: shape {tuple(ours.shape)} != {tuple(theirs.shape)}"
    a, b = to_bytes(ours), to_bytes(theirs)
    if a != b:
        diff = (ours.view(INT_VIEW.get(ours.dtype, ours.dtype)) !=
                theirs.view(INT_VIEW.get(theirs.dtype, theirs.dtype))).nonzero()
        first = tuple(diff[0].tolist())
        pytest.fail(f"{what}: {len(diff)} elements differ, first at {first}: ours {ours[first]} "
                    f"vs compressed-tensors {theirs[first]}")


@pytest.mark.parametrize("group", [32, 64, 128, -1], ids=lambda g: f"g{g}" if g > 0 else "channel")
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("bits", range(2, 9), ids=lambda b: f"int{b}")
@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_quantize_matches_compressed_tensors(tool, tmp_path, dtype_name, bits, symmetric, group):
    dtype = DTYPES[dtype_name]
    weight = adversarial_weight(dtype)
    rows, cols = weight.shape
    (tmp_path / "w.bin").write_bytes(to_bytes(weight))
    out = tmp_path / "out"
    run_tool(tool, "quantize", dtype_name, rows, cols, bits, "sym" if symmetric else "asym", group,
             tmp_path / "w.bin", out)

    args, scale, zero_point, compressed, decompressed, fake = reference(weight, bits, symmetric,
                                                                         group)
    groups = scale.shape[1]
    packed = compressed["weight_packed"]
    assert_same_bits(from_file(Path(f"{out}.packed"), torch.int32, packed.shape), packed,
                     "weight_packed")
    assert_same_bits(from_file(Path(f"{out}.scales"), dtype, (rows, groups)), scale, "weight_scale")
    ours_deq = from_file(Path(f"{out}.deq"), dtype, (rows, cols))
    assert_same_bits(ours_deq, decompressed, "dequantized (decompress)")
    # fake_quantize keeps q as a float, so q = RNE(-0.3) = -0.0 dequantizes to -0.0 where the real
    # (int8) path gives +0.0; adding +0.0 folds the two zeros and leaves every other bit alone.
    assert_same_bits(ours_deq, fake + 0.0, "dequantized (fake_quantize)")
    if symmetric:
        assert "weight_zero_point" not in compressed
        assert not Path(f"{out}.zp").exists()
    else:
        zp = from_file(Path(f"{out}.zp"), torch.int32, (rows, groups))
        assert_same_bits(zp, zero_point.to(torch.int32), "zero point (unpacked)")
        zp_packed = compressed["weight_zero_point"]
        assert_same_bits(from_file(Path(f"{out}.zp_packed"), torch.int32, zp_packed.shape),
                         zp_packed, "weight_zero_point (packed)")


def test_adversarial_weights_hit_the_edge_cases():
    """Guards the test data itself: the cases above must actually occur."""
    w = adversarial_weight(torch.bfloat16)
    args, scale, zp, _, _, _ = reference(w, 4, False, 32)
    assert (scale == 2.0**-7).any(), "no all-zero group (eps scale)"
    assert (zp == 7).any() and (zp == -8).any(), "no zero point at the range ends"
    args, scale, _, _, _, _ = reference(w, 4, True, 32)
    q = torch.round(w.reshape(w.shape[0], -1, 32) / scale.unsqueeze(-1))
    ratio = (w.reshape(w.shape[0], -1, 32) / scale.unsqueeze(-1)).float()
    assert ((ratio - ratio.floor()) == 0.5).any(), "no exact ties"
    assert (q.abs() >= 7).any()
    assert ((w != 0) & (w.abs() < torch.finfo(torch.bfloat16).tiny)).any(), "no subnormals"


@pytest.mark.parametrize("bits", range(1, 9))
def test_pack_matches_pack_to_int32(tool, tmp_path, bits):
    g = torch.Generator().manual_seed(bits)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    q = torch.randint(lo, hi + 1, (5, 100), generator=g, dtype=torch.int8)  # 100: ragged tail
    (tmp_path / "q.bin").write_bytes(q.numpy().tobytes())
    run_tool(tool, "pack", bits, 5, 100, tmp_path / "q.bin", tmp_path / "p.bin")
    want = pack_to_int32(q, bits)
    assert_same_bits(from_file(tmp_path / "p.bin", torch.int32, want.shape), want, "packed")

    zp = torch.randint(lo, hi + 1, (37, 6), generator=g, dtype=torch.int8)
    (tmp_path / "zp.bin").write_bytes(zp.to(torch.int32).numpy().tobytes())
    run_tool(tool, "pack-zp", bits, 37, 6, tmp_path / "zp.bin", tmp_path / "zpp.bin")
    want = pack_to_int32(zp, bits, packed_dim=0)
    assert_same_bits(from_file(tmp_path / "zpp.bin", torch.int32, want.shape), want, "packed zp")


def test_format_worked_packing_vector(tool, tmp_path):
    q = torch.tensor([[-8, -1, 0, 1, 7, 3, -3, 2]], dtype=torch.int8)
    (tmp_path / "q.bin").write_bytes(q.numpy().tobytes())
    run_tool(tool, "pack", 4, 1, 8, tmp_path / "q.bin", tmp_path / "p.bin")
    assert (tmp_path / "p.bin").read_bytes() == bytes([0x70, 0x98, 0xBF, 0xA5])
    assert pack_to_int32(q, 4).item() == -1514170256


@pytest.mark.parametrize("dtype_name", ["BF16", "F16"])
def test_float_conversion_matches_torch(tool, tmp_path, dtype_name):
    dtype = DTYPES[dtype_name]
    g = torch.Generator().manual_seed(99)
    random_bits = torch.randint(-(2**31), 2**31 - 1, (200000,), generator=g, dtype=torch.int64)
    # Random bit patterns cover every exponent; add values near the 16-bit formats' ranges, every
    # float that is a tie between two 16-bit neighbours, and the specials.
    x = torch.cat([
        random_bits.to(torch.int32).view(torch.float32),
        torch.randn(100000, generator=g) * 1e-6,
        torch.randn(100000, generator=g) * 1e4,
        torch.arange(0, 65536, dtype=torch.int32).to(torch.int16).view(dtype).float(),
        torch.tensor([65504.0, 65519.0, 65520.0, 65536.0, 2.0**-25, 2.0**-24, 1.5 * 2.0**-24,
                      3.3895e38, 3.3961e38, float("inf"), -float("inf"), float("nan"), -0.0]),
    ])
    x = torch.cat([x, (x.view(torch.int32) + 0x8000).view(torch.float32)])  # BF16 ties and nearby
    (tmp_path / "x.bin").write_bytes(x.numpy().tobytes())
    run_tool(tool, "convert", dtype_name, tmp_path / "x.bin", tmp_path / "y.bin")
    ours = from_file(tmp_path / "y.bin", dtype, x.shape)
    theirs = x.to(dtype)
    nan = theirs.isnan()
    assert torch.equal(ours.isnan(), nan)
    assert_same_bits(ours[~nan], theirs[~nan], f"float32 -> {dtype_name}")


def test_compressed_tensors_is_the_version_we_write(spk, tmp_path):
    """One compressed-tensors version: the installed library these suites compare against, the pin of
    tests/requirements.txt, and what `sparkulator quantize` writes into quantization_config.version
    (kCompressedTensorsVersion; llm-compressor's model_free_ptq writes compressed_tensors.__version__)."""
    import compressed_tensors

    installed = importlib.metadata.version("compressed-tensors")
    assert compressed_tensors.__version__ == installed
    pins = [line.split("==")[1].strip() for line in REQUIREMENTS.read_text().splitlines()
            if line.startswith("compressed-tensors==")]
    assert pins == [installed], f"tests/requirements.txt pins {pins}, {installed} is installed"

    spk("example", tmp_path / "src", "--family", "llm")
    spk("quantize", tmp_path / "src", tmp_path / "q")
    written = json.loads((tmp_path / "q" / "config.json").read_text())
    assert written["quantization_config"]["version"] == installed
    assert f"writes compressed-tensors {installed} " in spk("version").stdout
