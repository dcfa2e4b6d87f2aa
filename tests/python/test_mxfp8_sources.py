"""`sparkulator quantize` of a MiniMax-M3 DSpark draft stored in MiniMax's MXFP8.

vLLM 0.34 reads the draft from the target repo's `dspark/` folder (config/speculative.py
_MINIMAX_M3_DSPARK_SUBFOLDER) as DSparkMiniMaxDraftModel (models/minimax_m3/common/dspark.py): its
Linears are F8_E4M3 `X.weight` with U8 E8M0 exponents in `X.weight_scale_inv` [rows, cols / 32]
(renamed to weight_scale by its load_weights), under quantization_config {"quant_method": "mxfp8",
"ignored_layers": [...]} (ModelOptMxFp8Config). The source here has every weight name the 0.34
module map says that load_weights accepts (language_model.model.dspark.layers.N.decoder_layer.*),
quantized to MXFP8 in torch, and is decoded independently in numpy (E4M3 bits times 2^(e - 127),
rounded to BF16): what quantize keeps dense must be those BF16 values exactly, and what it
quantizes to W4A16 must dequantize (unpacked in numpy) to within half a step of them.
"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_draft_kinds import SIDE, config_for, module_weights, plain_weights  # noqa: E402

MAP = json.loads((Path(__file__).resolve().parents[2] / "data" / "vllm_module_map" /
                  "vllm-0.34.0.json").read_text())
NAME = "DSparkMiniMaxDraftModel"
ARCH = MAP["architectures"][NAME]
BLOCK = 32  # MXFP8: one E8M0 exponent per 32 inputs of a row


def mxfp8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """OCP MX quantization of `w` [rows, cols]: per 32 inputs e = floor(log2(absmax)) - 8 + 127
    (E4M3's largest exponent is 8), values w / 2^(e - 127) clamped to +-448 and cast to E4M3."""
    rows, cols = w.shape
    blocks = w.float().reshape(rows, cols // BLOCK, BLOCK)
    amax = blocks.abs().amax(-1).clamp(min=2.0 ** -100)
    e = (torch.floor(torch.log2(amax)) - 8 + 127).clamp(0, 254)
    q = (blocks / torch.exp2(e - 127).unsqueeze(-1)).clamp(-448, 448)
    return q.reshape(rows, cols).to(torch.float8_e4m3fn), e.to(torch.uint8)


def e4m3_values(bits: np.ndarray) -> np.ndarray:
    """E4M3 (e4m3fn) bytes to float32, from the bit layout: sign, 4 exponent bits (bias 7),
    3 mantissa bits; exponent 0 is subnormal (m / 8 * 2^-6). No NaN (0x7F) is stored here."""
    b = bits.astype(np.int32)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp, man = (b >> 3) & 0xF, (b & 7).astype(np.float64)
    mag = np.where(exp == 0, man / 8 * 2.0 ** -6, (1 + man / 8) * 2.0 ** (exp - 7))
    return (sign * mag).astype(np.float32)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> BF16 bits, round to nearest even (finite values)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def reference_decode(q: torch.Tensor, e: torch.Tensor) -> np.ndarray:
    """BF16 bits of value * 2^(e - 127), the product in float32 (vLLM's dequant_mxfp8_to_bf16)."""
    values = e4m3_values(q.view(torch.uint8).numpy())
    scale = np.exp2(e.numpy().astype(np.float32) - 127).repeat(BLOCK, axis=1)
    return bf16_bits(values * scale)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def w4a16_dequantize(packed: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """compressed-tensors pack-quantized int4, symmetric: eight nibbles a little-endian int32 word,
    lowest first, stored q + 8; value (q * s). Returns the values and each one's step s."""
    words = packed.view(np.uint32)
    nibbles = (words[..., None] >> (np.arange(8, dtype=np.uint32) * 4)) & 0xF
    q = nibbles.reshape(packed.shape[0], -1).astype(np.float32) - 8
    step = scale.repeat(q.shape[1] // scale.shape[1], axis=1)
    return q * step, step


@pytest.fixture(scope="module")
def minimax(tmp_path_factory, spk):
    """The MXFP8 source, its reference decode (name -> BF16 bits), and its W4A16 output."""
    root = tmp_path_factory.mktemp("minimax_dspark")
    src = root / "dspark"
    src.mkdir()
    g = torch.Generator().manual_seed(3)
    tensors, reference = {}, {}
    for weight in module_weights(ARCH):
        # Magnitudes spread over many binades, so that blocks take different exponents.
        w = torch.randn(SIDE, SIDE, generator=g) * torch.exp2(torch.randint(-9, -2, (SIDE, 1),
                                                                              generator=g))
        q, e = mxfp8(w)
        tensors[weight] = q
        tensors[weight.removesuffix(".weight") + ".weight_scale_inv"] = e
        reference[weight] = reference_decode(q, e)
    for p in plain_weights(ARCH):
        shape = (SIDE,) if "norm" in p or not p.endswith(".weight") else (SIDE, SIDE)
        tensors[p] = (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)
    save_file(tensors, str(src / "model.safetensors"), metadata={"format": "pt"})
    config = config_for(NAME, ARCH, {"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "mxfp8", "ignored_layers": ["lm_head"]}})
    (src / "config.json").write_text(json.dumps(config))
    out = root / "w4a16"
    plan = json.loads(spk("quantize", src, out, "--json", "--no-fsync").stdout)
    return src, reference, out, plan


def test_the_source_is_decoded_and_recorded(minimax):
    _, _, out, plan = minimax
    written = json.loads((out / "config.json").read_text())
    assert written["sparkulator"]["decoded_source"]["quantization_config"]["quant_method"] == \
        "mxfp8"
    assert "quantization_config" in written and written["quantization_config"]["quant_method"] == \
        "compressed-tensors"
    stored = load_file(str(out / "model.safetensors"))
    assert not [k for k in stored if k.endswith("weight_scale_inv")], "scales must be consumed"
    assert plan  # quantize --json answered


def test_dense_weights_are_the_exact_bf16_decode(minimax):
    _, reference, out, _ = minimax
    stored = load_file(str(out / "model.safetensors"))
    dense = [w for w in reference if w in stored]
    assert dense, "the DSpark plan keeps some Linear dense (q/k/v: read directly by vLLM)"
    for w in dense:
        assert stored[w].dtype == torch.bfloat16, w
        got = stored[w].view(torch.int16).numpy().view(np.uint16)
        np.testing.assert_array_equal(got, reference[w], err_msg=w)


def test_quantized_weights_dequantize_to_within_half_a_step_of_the_decode(minimax):
    _, reference, out, _ = minimax
    stored = load_file(str(out / "model.safetensors"))
    quantized = [w for w in reference if w.removesuffix(".weight") + ".weight_packed" in stored]
    assert quantized, "the DSpark plan quantizes the MLP and o_proj"
    for w in quantized:
        m = w.removesuffix(".weight")
        scale = stored[m + ".weight_scale"].float().numpy()
        values, step = w4a16_dequantize(stored[m + ".weight_packed"].numpy(), scale)
        ref = bf16_values(reference[w])
        # Half a step of rounding, widened by the BF16 rounding of the quotient w / s before it is
        # rounded to an integer (up to 7.5 * 2^-8 of a step: -7.49 rounds to -7.5, then to -8).
        assert np.all(np.abs(values - ref) <= 0.55 * step + 2.0 ** -24), w
