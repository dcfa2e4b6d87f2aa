"""A vLLM general plugin for hosts whose vLLM CPU library has no W4A16 GEMM.

vLLM 0.32's CPU wheel loads `_C_AVX2` on a CPU without AVX-512, and that library has no
`cpu_gemm_wna16`: a W4A16 checkpoint loads (vLLM logs "Using CPUWNA16LinearKernel for
CompressedTensorsWNA16") and the first request then fails with
`AttributeError: '_OpNamespace' '_C' object has no attribute 'cpu_gemm_wna16'`.
Only on such a host, and only when the e2e puts this folder on PYTHONPATH, `register` replaces
`vllm._custom_ops.cpu_gemm_wna16` by a reference GEMM: it undoes CPUWNA16LinearKernel's repacking
(_process_gptq_weights_w4a16), dequantizes (q - 8) * scale per group, and multiplies in the input's
dtype, refusing what the kernel refuses (a 1-D input, an input that is not BF16 or F16) with the
kernel's own errors. Numerics are those of the W4A16 weights (what acceptance measures); its speed is not vLLM's
kernel's. vLLM loads it through the `vllm.general_plugins` entry point in this folder's dist-info.

W4A16 fused MoE has the same gap, wider: vLLM 0.32's only CPU W4A16 MoE experts are CPUExpertsInt4
(AMX tiles only, cpu_moe.py `_supports_current_device`) and ZentorchExpertsInt4 (AMD Zen), so on
any other x86 host a compressed-tensors W4A16 MoE fails at load with "No WNA16 MoE backend supports
the deployment configuration." Only there, `register` lets vLLM pick its own CPU backend
(CompressedTensorsWNA16MoEMethod, backend 'CPU', CPUExpertsInt4: its weight loading, routing and
top-k are vLLM's) and stands in for the two AMX pieces: the weight conversion
(`_process_weights_cpu`) dequantizes the loaded w13/w2 (q - 8) * scale per group to BF16, and
`CPUExpertsInt4.apply` runs the experts in torch (silu(x W1^T) * x W3^T) W2^T, weighted by the
router's top-k weights, for any routing method the CPURouter computes (CPUExpertsInt4 itself
accepts softmax routings only, so a W4A16 Laguna MoE finds no backend even on an AMX host).
Symmetric 4-bit checkpoints only (it refuses others).
The stand-in is used on AMX hosts too, so that the e2e's MoE verdicts are the same on every host;
`SPK_E2E_MOE_EXPERTS=vllm` keeps vLLM's own CPUExpertsInt4 where AMX exists. Measured with it on a
Sapphire Rapids host (2026-12-02, vLLM 0.32.0 CPU): the Laguna MoE finds no backend ("No WNA16 MoE
backend supports the deployment configuration.", its sigmoid routing, as said above), and the
Qwen3-MoE's greedy tokens agree with transformers on the dequantized weights at 0.83 (the e2e wants
0.9). With the stand-in on that host the Laguna MoE agrees at 0.96 and the Qwen3-MoE at 0.875
(median logprob difference 0.032): the host's BF16 GEMMs (AMX) move near-ties of this random model,
an open failure of the smoke on such hosts.

One routing gap, on every CPU and for BF16 too: vLLM 0.32's CPURouter (router/cpu_router.py) routes
sigmoid scores only through its grouped top-k; the ungrouped path Laguna's LagunaMoE takes
(scoring_func="sigmoid", use_grouped_topk=False, e_score_correction_bias) stops the first request
with `AssertionError` at `assert self.scoring_func == "softmax"` (cpu_router.py:239). Where that
assertion is in the installed source, `register` routes exactly those calls through vLLM's own
`cpu_router._grouped_topk` with one group holding every expert (sigmoid scores, the bias added for
the top-k choice only, weights from the unbiased scores, renormalized), which is what the GPU path
and transformers' LagunaTopKRouter compute. Every other routing call is vLLM's, unchanged.

And one loading gap, on every platform: vLLM 0.32's MoERunner hands `mlp.experts.e_score_correction_bias`
to RoutedExperts.load_weights (routed_experts.py:981), whose expert mapping has no entry for it, so
the tensor is dropped without an error and the bias stays zeros (observed: both layers'
`mlp.experts.routed_experts.e_score_correction_bias` read back 0.0 with a non-zero bias on disk, and
vLLM's greedy tokens agree with transformers run with a zeroed bias). Where the installed
load_weights never names the bias, `register` copies it into the parameter vLLM built for it (the
one its router reads) and lets vLLM load everything else.
"""

import logging
import os

import torch

log = logging.getLogger("vllm.spk_e2e_wna16")


def _has_kernel() -> bool:
    try:
        torch.ops._C.cpu_gemm_wna16
        return True
    except (AttributeError, RuntimeError):
        return False


# The input dtypes vLLM 0.32's cpu_gemm_wna16 dispatches on, and torch's name of the others in the
# kernel's own refusal.
_KERNEL_DTYPES = (torch.bfloat16, torch.float16)
_TORCH_TYPE_NAMES = {torch.float32: "Float", torch.float64: "Double"}


def _refuse_as_the_kernel_does(input: torch.Tensor) -> None:
    """Raises what vLLM's cpu_gemm_wna16 raises for `input`, so that a host served by this stand-in
    reaches the verdicts of a host with the kernel. The op's Python wrapper (_custom_ops.py) flattens
    inputs of more than two dims only, and the kernel reads input.size(1): a 1-D input (a P-EAGLE
    proposer's mask_hidden through fc) fails there with torch's IndexError, where CUDA's Marlin path
    flattens it first. The kernel takes BF16 and F16 inputs only (NotImplementedError otherwise).
    self_test compares both refusals with the real kernel's where it exists."""
    if input.dim() <= 2:
        input.size(1)  # torch's "Dimension out of range" for a 1-D input, as in the kernel
    if input.dtype not in _KERNEL_DTYPES:
        name = _TORCH_TYPE_NAMES.get(input.dtype, str(input.dtype))
        raise NotImplementedError(f'"cpu_gemm_wna16" not implemented for \'{name}\'')


def reference_gemm_wna16(input, q_weight, scales, zeros, bias, pack_factor, isa_hint):
    """cpu_gemm_wna16 for CPUWNA16LinearKernel's w4a16 layout: q_weight [out/16, in*2] int32,
    scales [groups, out]; zeros None (symmetric uint4b8) or packed [groups, out/8]."""
    from vllm.model_executor.layers.quantization.utils.quant_utils import (
        unpack_quantized_values_into_int32)
    from vllm.scalar_type import scalar_types
    del isa_hint
    assert pack_factor == 8, "4-bit weights only"
    _refuse_as_the_kernel_does(input)
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


def _has_moe_kernel() -> bool:
    return torch.cpu._is_amx_tile_supported()


def dequantize_moe_wna16(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """compressed-tensors' pack-quantized experts [E, N, K/8] int32 (nibble i of word j is column
    8j + i, stored as q + 8) with group scales [E, N, K/group] -> BF16 [E, N, K]."""
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    q = ((packed.unsqueeze(-1) >> shifts) & 0xF).flatten(-2) - 8
    group = q.size(-1) // scale.size(-1)
    return (q.float() * scale.float().repeat_interleave(group, -1)).to(torch.bfloat16)


def reference_process_weights_cpu(quant_config, w13, w2, w13_scale, w2_scale, w13_qzeros=None,
                                  w2_qzeros=None, w13_bias=None, w2_bias=None):
    """Stands in for int_wna16._process_weights_cpu: BF16 weights in place of the AMX blocks."""
    if getattr(quant_config, "num_bits", 4) != 4 or not getattr(quant_config, "symmetric", True):
        raise NotImplementedError("sparkulator e2e MoE stand-in: symmetric 4-bit weights only")
    none = torch.zeros(1, dtype=torch.int32)  # the CPU backend asserts zero points exist
    return (dequantize_moe_wna16(w13, w13_scale), dequantize_moe_wna16(w2, w2_scale), w13_scale,
            w2_scale, none, none.clone(), None, None, w13_bias, w2_bias)


def reference_moe_apply(self, output, hidden_states, w1, w2, topk_weights, topk_ids, activation,
                        global_num_experts, expert_map, a1q_scale, a2_scale, workspace13,
                        workspace2, expert_tokens_meta, apply_router_weight_on_input):
    """CPUExpertsInt4.apply on the BF16 weights above: SiLU-and-mul experts, top-k weighted sum."""
    del activation, global_num_experts, a1q_scale, a2_scale, workspace13, workspace2
    del expert_tokens_meta
    assert expert_map is None and not apply_router_weight_on_input
    x = hidden_states.float()
    out = torch.zeros(x.shape[0], w2.size(1), dtype=torch.float32)
    for e in topk_ids.unique().tolist():
        rows, slot = (topk_ids == e).nonzero(as_tuple=True)
        gate, up = (x[rows] @ w1[e].float().T).chunk(2, dim=-1)
        y = (torch.nn.functional.silu(gate) * up) @ w2[e].float().T
        out.index_add_(0, rows, y * topk_weights[rows, slot].float().unsqueeze(-1))
    output.copy_(out.to(output.dtype))


def _self_test_moe() -> None:
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32
    gen = torch.Generator().manual_seed(1)
    q = torch.randint(-8, 8, (2, 64, 256), dtype=torch.int8, generator=gen)
    scale = (torch.rand(2, 64, 2, generator=gen) + 0.1).to(torch.bfloat16)
    packed = torch.stack([pack_to_int32(q[e], 4) for e in range(2)])
    want = (q.float() * scale.float().repeat_interleave(128, -1)).to(torch.bfloat16)
    torch.testing.assert_close(dequantize_moe_wna16(packed, scale), want, rtol=0, atol=0)


def _register_moe() -> None:
    from vllm.model_executor.layers.fused_moe.experts import cpu_moe
    from vllm.model_executor.layers.fused_moe.oracle import int_wna16
    cpu_moe.CPUExpertsInt4._supports_current_device = staticmethod(lambda: True)
    cpu_moe.CPUExpertsInt4.apply = reference_moe_apply
    # CPUExpertsInt4 takes softmax routings only (cpu_moe.py:872-881), so Laguna's sigmoid + bias
    # (RoutingMethodType.MiniMax2) finds no W4A16 backend even with AMX; the stand-in's apply takes
    # whatever top-k the CPURouter computed, as vLLM's BF16 CPU experts do (cpu_moe.py:192-199).
    cpu_moe.CPUExpertsInt4._supports_routing_method = staticmethod(lambda *_: True)
    int_wna16._process_weights_cpu = reference_process_weights_cpu
    why = ("no AMX here, so vLLM has no CPU W4A16 MoE kernel" if not _has_moe_kernel() else
           "AMX here, but SPK_E2E_MOE_EXPERTS is not 'vllm'")
    log.warning("sparkulator e2e: %s; W4A16 experts use the e2e's stand-in (dequantize to BF16 + "
                "torch experts)", why)


def _router_lacks_ungrouped_sigmoid() -> bool:
    import inspect

    from vllm.model_executor.layers.fused_moe.router import cpu_router
    src = inspect.getsource(cpu_router.CPURouter._compute_routing)
    return 'assert self.scoring_func == "softmax"' in src


def _register_sigmoid_routing() -> None:
    from vllm.model_executor.layers.fused_moe.router import cpu_router
    vllms = cpu_router.CPURouter._compute_routing

    def compute_routing(self, hidden_states, router_logits, indices_type, *, input_ids=None):
        if (self.use_grouped_topk or self.scoring_func != "sigmoid"
                or self.custom_routing_function is not None):
            return vllms(self, hidden_states, router_logits, indices_type, input_ids=input_ids)
        return cpu_router._grouped_topk(
            gating_output=router_logits, topk=self.top_k, renormalize=self.renormalize,
            num_expert_group=1, topk_group=1, scoring_func="sigmoid",
            routed_scaling_factor=self.routed_scaling_factor,
            e_score_correction_bias=self.e_score_correction_bias)

    cpu_router.CPURouter._compute_routing = compute_routing
    log.warning("sparkulator e2e: vLLM's CPURouter asserts softmax for ungrouped sigmoid routing "
                "(Laguna MoE); it runs through vLLM's _grouped_topk with one group instead")


BIAS = "e_score_correction_bias"


def _experts_drop_the_bias() -> bool:
    import inspect

    from vllm.model_executor.layers.fused_moe import routed_experts
    return BIAS not in inspect.getsource(routed_experts.RoutedExperts.load_weights)


def _register_bias_loading() -> None:
    from vllm.model_executor.layers.fused_moe import routed_experts
    vllms = routed_experts.RoutedExperts.load_weights

    def load_weights(self, weights):
        loaded = []

        def the_rest():
            for name, tensor in weights:
                if name == BIAS and isinstance(self.e_score_correction_bias, torch.nn.Parameter):
                    self.e_score_correction_bias.data.copy_(tensor)
                    loaded.append(name)
                else:
                    yield name, tensor

        yield from vllms(self, the_rest())
        yield from loaded

    routed_experts.RoutedExperts.load_weights = load_weights
    log.warning("sparkulator e2e: vLLM's RoutedExperts.load_weights drops "
                "mlp.experts.e_score_correction_bias (Laguna MoE); the e2e loads it")


def _self_test_sigmoid_routing() -> None:
    """One group of vLLM's _grouped_topk is transformers' LagunaTopKRouter: sigmoid, top-k on the
    biased scores, weights of the unbiased ones, renormalized."""
    from vllm.model_executor.layers.fused_moe.router import cpu_router
    gen = torch.Generator().manual_seed(2)
    logits, bias = torch.randn(5, 8, generator=gen), torch.randn(8, generator=gen)
    weights, ids = cpu_router._grouped_topk(logits, 2, True, 1, 1, "sigmoid", 1.0, bias)
    scores = logits.sigmoid()
    want_ids = torch.topk(scores + bias, 2, dim=-1)[1]
    want = scores.gather(-1, want_ids)
    assert torch.equal(ids.sort(-1)[0].long(), want_ids.sort(-1)[0])
    torch.testing.assert_close(weights.gather(-1, ids.long().argsort(-1)),
                               (want / want.sum(-1, keepdim=True)).gather(-1, want_ids.argsort(-1)))


def register() -> None:
    import vllm.platforms
    if not vllm.platforms.current_platform.is_cpu():
        return
    from vllm import _custom_ops as ops
    if _router_lacks_ungrouped_sigmoid():
        _register_sigmoid_routing()
    if _experts_drop_the_bias():
        _register_bias_loading()
    if not _has_moe_kernel() or os.environ.get("SPK_E2E_MOE_EXPERTS") != "vllm":
        _register_moe()
    if os.environ.get("SPK_E2E_DRAFTER_KERNEL_LOG") == "1":
        _register_drafter_kernel_log()
    if _has_kernel():
        return
    ops.cpu_gemm_wna16 = reference_gemm_wna16
    log.warning("sparkulator e2e: this vLLM CPU library has no cpu_gemm_wna16 (no AVX-512 here); "
                "W4A16 layers use the e2e's reference GEMM (dequantize + matmul)")


def _register_drafter_kernel_log() -> None:
    """Not a gap: evidence. vLLM 0.32 logs "Using <kernel> for CompressedTensorsWNA16" once per
    process (CompressedTensorsWNA16._kernel_backends_being_used is a class-level set), so where a
    W4A16 draft is served on a W4A16 target (run.py's smoke) the drafter's layers, built after the
    target's, would log nothing. With SPK_E2E_DRAFTER_KERNEL_LOG=1 the set is emptied when the
    drafter starts loading (SpecDecodeBaseProposer.load_model, right after vLLM's "Loading drafter
    model..."), so vLLM's own create_weights logs the kernel it chose for the drafter's layers;
    kernel choice and loading are unchanged."""
    from vllm.model_executor.layers.quantization.compressed_tensors.schemes import (
        compressed_tensors_wNa16 as wna16)
    from vllm.v1.spec_decode import llm_base_proposer
    scheme = wna16.CompressedTensorsWNA16
    base = llm_base_proposer.SpecDecodeBaseProposer
    if not isinstance(getattr(scheme, "_kernel_backends_being_used", None), set):
        log.warning("sparkulator e2e: CompressedTensorsWNA16 has no _kernel_backends_being_used "
                    "set here; the drafter's kernel line is vLLM's as is")
        return
    original = base.load_model

    def load_model(self, target_model):
        scheme._kernel_backends_being_used.clear()
        return original(self, target_model)

    base.load_model = load_model
    log.warning("sparkulator e2e: the W4A16 kernel line is logged again for the drafter's layers")


def self_test() -> None:
    """Asserts that reference_gemm_wna16 reads CPUWNA16LinearKernel's repacked layout (built here
    with vLLM's own pack/unpack helpers, as _process_gptq_weights_w4a16 does) back to
    (q - 8) * scale, and that the MoE stand-in reads compressed-tensors' own packing of expert
    weights (pack_to_int32) back to q * scale. tests/python/test_vllm_smoke.py runs it in the vLLM
    venv."""
    _self_test_moe()
    _self_test_sigmoid_routing()
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
    x = torch.randn(3, n_in, generator=gen).to(torch.bfloat16)
    scales = scales.to(torch.bfloat16)
    want = x.float() @ ((q - 8).float() * scales.float().repeat_interleave(group, 0))
    got = reference_gemm_wna16(x, w, scales, None, None, 8, "vec")
    torch.testing.assert_close(got, want.to(torch.bfloat16))
    refusals = _refusals(reference_gemm_wna16, x, w, scales)
    assert refusals == [
        ("IndexError", "Dimension out of range (expected to be in range of [-1, 0], but got 1)"),
        ("NotImplementedError", '"cpu_gemm_wna16" not implemented for \'Float\'')], refusals
    import vllm._custom_ops as ops  # loads vLLM's CPU library, which registers the kernel
    if _has_kernel():  # an AVX-512 host: the stand-in must do what the kernel does
        assert _refusals(ops.cpu_gemm_wna16, x, w, scales) == refusals
        torch.testing.assert_close(ops.cpu_gemm_wna16(x, w, scales, None, None, 8, "vec"), got,
                                   rtol=1e-2, atol=1.0)


def _refusals(gemm, x, w, scales) -> list:
    """(exception name, message) of `gemm` on a 1-D input and on an F32 input."""
    out = []
    for bad in (x[0], x.float()):
        try:
            gemm(bad, w, scales.to(bad.dtype), None, None, 8, "vec")
            out.append(None)
        except (IndexError, NotImplementedError) as e:
            out.append((type(e).__name__, str(e)))
    return out
