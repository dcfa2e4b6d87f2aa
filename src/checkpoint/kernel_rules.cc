#include "checkpoint/kernel_rules.h"

#include <fmt/format.h>

#include <array>

namespace spk {
namespace {

// vLLM's validate_fp8_block_shape (quantization/utils/fp8_utils.py), called by
// compressed_tensors_w8a8_fp8.py create_weights before any kernel is chosen; compressed-tensors
// sets no weight_block_size, so linear.py's mismatch allowance never applies. Every output
// partition that --tp > 1 splits, and every member of a merged GEMM but the last, holds whole
// 128-row blocks; a row-parallel layer's rows are not split, so it is not checked.
// (The row-parallel input check is the plan's whole-column-block rule.)
std::optional<std::string> Fp8BlockRows(const GemmPartition& p) {
  if (p.out % 128 == 0 || (!p.rows_split && p.last_fused_member)) return std::nullopt;
  return fmt::format(
      "Weight output_partition_size = {} is not divisible by weight quantization block_n = 128.",
      p.out);
}

// CutlassW4A8LinearKernel.can_implement (kernels/linear/mixed_precision/cutlass.py), reached
// through choose_mp_linear_kernel: the GEMM is the whole fused layer on one rank, K = input
// columns, N = the fused members' rows summed. Every other CUDA kernel in _POSSIBLE_KERNELS
// refuses signed int4 with FP8 activations, so vLLM raises the chooser's error (its first line
// and CUTLASS's reason; the other kernels' reasons follow in vLLM's message).
std::optional<std::string> CutlassW4A8Tiles(const GemmPartition& p) {
  if (p.in % 128 == 0 && p.fused_out % 128 == 0) return std::nullopt;
  return fmt::format(
      "Failed to find a kernel that can implement the WNA16 linear layer. Reasons: ... "
      "CutlassW4A8LinearKernel cannot implement due to: K and N must be divisible by 128, got "
      "({}, {})",
      p.in, p.fused_out);
}

const std::array<KernelRule, 7> kRules = {{
    {.scheme = "w4afp8",
     .kernel = "CutlassW4A8LinearKernel",
     .kernels = "Hopper (sm90): CutlassW4A8LinearKernel, the only GPU kernel: on Ampere/Ada the "
                "scheme needs capability 90, on Blackwell CUTLASS W4A8 refuses anything but sm90 "
                "(Machete and Marlin take no signed int4); the CPU build runs "
                "Dynamic4bitLinearKernel",
     .condition = "K (input columns per partition) and N (the fused GEMM's rows per partition) "
                  "multiples of 128",
     .vllm_source = "kernels/linear/mixed_precision/cutlass.py CutlassW4A8LinearKernel."
                    "can_implement via kernels/linear/__init__.py choose_mp_linear_kernel",
     .rule = CutlassW4A8Tiles},
    {.scheme = "w8a8",
     .kernel = "",
     .kernels = "sm75+: CutlassInt8ScaledMMLinearKernel (cutlass_scaled_mm hands K or N not a "
                "multiple of 16 to triton_scaled_mm), then TritonInt8ScaledMMLinearKernel; CPU: "
                "CPUInt8ScaledMMLinearKernel",
     .condition = "none: every int8 kernel takes any shape",
     .vllm_source = "kernels/linear/scaled_mm/cutlass.py, _custom_ops.py cutlass_scaled_mm",
     .rule = nullptr},
    {.scheme = "fp8-dynamic",
     .kernel = "",
     .kernels = "Ada/Hopper/Blackwell (sm89+): FlashInferFP8 (per-tensor only, so skipped), "
                "CutlassFP8ScaledMMLinearKernel (pads to 16), ChannelWiseTorchFP8, "
                "MarlinFP8ScaledMMLinearKernel; Turing/Ampere: CompressedTensorsW8A16Fp8 on "
                "Marlin FP8",
     .condition = "none: CUTLASS pads, Marlin FP8 zero-pads (marlin_padded_nk)",
     .vllm_source = "kernels/linear/scaled_mm/cutlass.py, utils/marlin_utils_fp8.py",
     .rule = nullptr},
    {.scheme = "fp8-block",
     .kernel = "validate_fp8_block_shape",
     .kernels = "every GPU and the CPU build: the rule is checked in create_weights before a "
                "kernel (FlashInfer/DeepGEMM, CUTLASS, Marlin FP8, Triton) is chosen",
     .condition = "each output partition of a merged GEMM but the last, and every output "
                  "partition that --tp > 1 splits (column-parallel layers), a multiple of the "
                  "128-row block",
     .vllm_source = "quantization/utils/fp8_utils.py validate_fp8_block_shape (called by "
                    "compressed_tensors_w8a8_fp8.py create_weights)",
     .rule = Fp8BlockRows},
    {.scheme = "nvfp4a16",
     .kernel = "",
     .kernels = "Blackwell sm100/103: FlashInferCuteDslNvFp4W4A16LinearKernel; other GPUs "
                "sm75+: MarlinNvFp4LinearKernel",
     .condition = "none beyond whole 16-groups per partition: Marlin FP4 zero-pads to its tiles "
                  "(marlin_padded_nk), FlashInfer pads the weight (pad_nvfp4_weight_for_cutlass)",
     .vllm_source = "utils/marlin_utils_fp4.py prepare_fp4_layer_for_marlin, kernels/linear/"
                    "nvfp4/",
     .rule = nullptr},
    {.scheme = "mxfp4a16",
     .kernel = "",
     .kernels = "Blackwell sm100+ with FlashInfer CuTe-DSL: FlashInferMxFp4LinearKernel, which "
                "quantizes the activations to MXFP4 (vLLM builds CompressedTensorsW4A4Mxfp4 with "
                "MXFP4 dynamic activations for a weight-only checkpoint too); other GPUs sm80+: "
                "MarlinMxFp4LinearKernel; emulation after it",
     .condition = "none beyond whole 32-groups per partition: Marlin FP4 zero-pads, FlashInfer "
                  "pads N (swizzle_mxfp4_scales)",
     .vllm_source = "kernels/linear/mxfp4/flashinfer.py, mxfp4/marlin.py, compressed_tensors.py "
                    "_get_scheme_from_parts (CompressedTensorsW4A4Mxfp4())",
     .rule = nullptr},
    {.scheme = "mxfp8a16",
     .kernel = "",
     .kernels = "Blackwell: FlashInfer CuTe-DSL/CUTLASS MXFP8 (K, N >= 128; N % 32 on sm12x); "
                "sm75+: MarlinMxfp8LinearKernel; emulation after it",
     .condition = "K a multiple of 32 (every MXFP8 kernel; the 32-group rule); Marlin zero-pads",
     .vllm_source = "kernels/linear/mxfp8/marlin.py MarlinMxfp8LinearKernel.can_implement",
     .rule = nullptr},
}};

}  // namespace

std::span<const KernelRule> AllKernelRules() { return kRules; }

const KernelRule* KernelRuleFor(std::string_view scheme) {
  for (const KernelRule& row : kRules) {
    if (row.scheme == scheme) return &row;
  }
  return nullptr;
}

std::optional<std::string> KernelRuleBreak(const KernelRule& row, const GemmPartition& p) {
  if (row.rule == nullptr) return std::nullopt;
  auto message = row.rule(p);
  if (!message) return std::nullopt;
  return fmt::format(
      "[{}, {}] per partition in {} (fused N = {}): {} needs {}; vLLM raises \"{}\" ({})", p.out,
      p.in, p.vllm_module, p.fused_out, row.kernel, row.condition, *message, row.vllm_source);
}

}  // namespace spk
