"""A vLLM general plugin for hosts whose vLLM CPU library has no W4A16 GEMM.

vLLM 0.32's CPU wheel loads `_C_AVX2` on a CPU without AVX-512, and that library has no
`cpu_gemm_wna16`: a W4A16 checkpoint loads (vLLM logs "Using CPUWNA16LinearKernel for
CompressedTensorsWNA16") and the first request then fails with
`AttributeError: '_OpNamespace' '_C' object has no attribute 'cpu_gemm_wna16'`.
Only on such a host, and only when the e2e puts this folder on PYTHONPATH, `register` replaces
`vllm._custom_ops.cpu_gemm_wna16` by a reference GEMM: it undoes CPUWNA16LinearKernel's repacking
(_process_gptq_weights_w4a16), dequantizes (q - 8) * scale per group, and multiplies in the input's
dtype. Numerics are those of the W4A16 weights (what acceptance measures); its speed is not vLLM's
kernel's. vLLM loads it through the `vllm.general_plugins` entry point in this folder's dist-info.
"""

import logging

import torch

log = logging.getLogger("vllm.spk_e2e_wna16")


def _has_kernel() -> bool:
    try:
        torch.ops._C.cpu_gemm_wna16
        return True
    except (AttributeError, RuntimeError):
        return False


def reference_gemm_wna16(input, q_weight, scales, zeros, bias, pack_factor, isa_hint):
    """cpu_gemm_wna16 for CPUWNA16LinearKernel's w4a16 layout: q_weight [out/16, in*2] int32,
    scales [groups, out]; zeros None (symmetric uint4b8) or packed [groups, out/8]."""
    from vllm.model_executor.layers.quantization.utils.quant_utils import (
        unpack_quantized_values_into_int32)
    from vllm.scalar_type import scalar_types
    del isa_hint
    assert pack_factor == 8, "4-bit weights only"
    out_features = scales.size(1)
    in_features = q_weight.size(1) // 2
    packed = q_weight.view(out_features // 16, in_features, 2).permute(1, 0, 2)
    packed = packed.reshape(in_features, out_features // 8)
    values = unpack_quantized_values_into_int32(packed, scalar_types.uint4b8, 1)  # [in, out]
    if zeros is None:
        values = values - 8
    else:
        zp = unpack_quantized_values_into_int32(zeros, scalar_types.uint4, 1)
        values = values - zp.repeat_interleave(in_features // zp.size(0), 0)
    group = in_features // scales.size(0)
    weight = values.to(torch.float32) * scales.to(torch.float32).repeat_interleave(group, 0)
    shape = input.shape
    out = input.reshape(-1, shape[-1]).to(torch.float32) @ weight
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(input.dtype).reshape(shape[:-1] + (out_features,))


def register() -> None:
    import vllm.platforms
    if not vllm.platforms.current_platform.is_cpu():
        return
    from vllm import _custom_ops as ops
    if _has_kernel():
        return
    ops.cpu_gemm_wna16 = reference_gemm_wna16
    log.warning("sparkulator e2e: this vLLM CPU library has no cpu_gemm_wna16 (no AVX-512 here); "
                "W4A16 layers use the e2e's reference GEMM (dequantize + matmul)")


def self_test() -> None:
    """Asserts that reference_gemm_wna16 reads CPUWNA16LinearKernel's repacked layout (built here
    with vLLM's own pack/unpack helpers, as _process_gptq_weights_w4a16 does) back to
    (q - 8) * scale. tests/python/test_vllm_smoke.py runs it in the vLLM venv."""
    from vllm.model_executor.layers.quantization.utils.quant_utils import (
        pack_quantized_values_into_int32, unpack_quantized_values_into_int32)
    from vllm.scalar_type import scalar_types
    n_in, n_out, group = 256, 512, 128
    gen = torch.Generator().manual_seed(0)
    q = torch.randint(0, 16, (n_in, n_out), dtype=torch.int32, generator=gen)
    scales = torch.rand(n_in // group, n_out, generator=gen) + 0.1
    w = unpack_quantized_values_into_int32(
        pack_quantized_values_into_int32(q, scalar_types.uint4b8, 0), scalar_types.uint4b8, 0)
    w = pack_quantized_values_into_int32(w, scalar_types.uint4b8, 1)
    w = w.view(n_in, -1, 2).permute(1, 0, 2).reshape(-1, n_in * 2).contiguous()
    x = torch.randn(3, n_in, generator=gen)
    want = x @ ((q - 8).float() * scales.repeat_interleave(group, 0))
    torch.testing.assert_close(reference_gemm_wna16(x, w, scales, None, None, 8, "vec"), want)
