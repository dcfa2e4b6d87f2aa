#include "vllm/kernel_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <initializer_list>

#include "quant/scheme.h"

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

// ---- Pack-quantized (WNA16). compressed_tensors_wNa16.py create_weights builds the
// MPLinearLayerConfig with K = input columns per rank and N = the fused GEMM's rows per rank, and
// the weight type uint4b8/uint8b128 (symmetric) or uint4/uint8 (zero points).

std::string_view VllmWeightTypeName(const GemmPartition& p) {
  if (p.bits == 4) return p.symmetric ? "uint4b8" : "uint4";
  return p.symmetric ? "uint8b128" : "uint8";
}

bool InList(int64_t g, std::initializer_list<int64_t> list) {
  return std::find(list.begin(), list.end(), g) != list.end();
}

// Marlin before vllm#45295 (marlin_utils.py check_marlin_supports_shape), judged per member.
std::optional<std::string> MarlinTilesBeforePadding(const GemmPartition& p) {
  if (p.out % 64 != 0) {
    return fmt::format("out_features per partition {} is not a multiple of 64 (Marlin)", p.out);
  }
  if (p.in % 128 != 0) {
    return fmt::format("in_features per partition {} is not a multiple of 128 (Marlin)", p.in);
  }
  return std::nullopt;
}

// machete.py can_implement (Hopper only) with machete_utils.py's lists and shape check.
std::optional<std::string> MacheteRefuses(const GemmPartition& p) {
  if (!InList(p.group_size, {-1, 64, 128})) {
    return fmt::format(
        "Group size ({}) not supported by Machete, supported group sizes are: "
        "[-1, 64, 128]",
        p.group_size);
  }
  if (p.in % 64 != 0) return "Input features size must be divisible by 64";
  if (p.fused_out % 128 != 0) return "Output features size must be divisible by 128";
  return std::nullopt;
}

// marlin.py MarlinLinearKernel.can_implement in vLLM 0.32: tiles are padded; zero points only
// with uint4 (query_marlin_supported_quant_types).
std::optional<std::string> MarlinRefuses(const GemmPartition& p) {
  if (!p.symmetric && p.bits != 4) {
    return fmt::format(
        "Quant type ({}) not supported by  Marlin, supported types are: "
        "[ScalarType.uint4]",
        VllmWeightTypeName(p));
  }
  if (!InList(p.group_size, {-1, 32, 64, 128})) {
    return fmt::format(
        "Group size ({}) not supported by Marlin, supported group sizes are: "
        "[-1, 32, 64, 128]",
        p.group_size);
  }
  if (p.group_size != -1 && p.group_size < p.full_in && p.in % p.group_size != 0) {
    return fmt::format("in_features per partition {} is not divisible by group_size = {}.", p.in,
                       p.group_size);
  }
  return std::nullopt;
}

// triton_w4a16.py TritonW4A16LinearKernel.can_implement (any CUDA GPU, 4-bit only).
std::optional<std::string> TritonW4A16Refuses(const GemmPartition& p) {
  if (p.bits != 4)
    return fmt::format(
        "Quant type {} not supported; supported: [ScalarType.uint4b8, "
        "ScalarType.uint4]",
        VllmWeightTypeName(p));
  if (p.fused_out % 8 != 0) {
    return fmt::format(
        "Output features ({}) must be divisible by 8 (8 int4 values packed per "
        "int32)",
        p.fused_out);
  }
  if (!InList(p.group_size, {-1, 32, 64, 128, 256}) && p.group_size != p.full_in) {
    return fmt::format(
        "Group size {} not supported; supported: [-1, 32, 64, 128, 256] or full K "
        "({})",
        p.group_size, p.full_in);
  }
  const int64_t group = p.group_size == -1 ? p.in : p.group_size;
  if (p.in % group != 0) {
    return fmt::format("Input features {} not divisible by group size {}", p.in, group);
  }
  return std::nullopt;
}

// cpu.py CPUWNA16LinearKernel.can_implement (the CPU build's only WNA16 kernel off AMD Zen:
// Dynamic4bitLinearKernel takes signed int4 only, ZentorchWNA16 needs a Zen CPU with zentorch).
std::optional<std::string> CpuWna16Refuses(const GemmPartition& p) {
  if (p.bits != 4) {
    return fmt::format(
        "Quant type ({}) not supported by CPUWNA16, supported types are: "
        "(ScalarType.uint4, ScalarType.uint4b8)",
        VllmWeightTypeName(p));
  }
  if (p.group_size != -1 && p.group_size % 2 != 0) {
    return fmt::format(
        "Group size ({}) not supported by CPUWNA16, supported group sizes are "
        "multiples of 2",
        p.group_size);
  }
  if (p.in % 32 != 0) {
    return fmt::format(
        "Input size ({}) not supported by CPUWNA16, supported sizes are multiples "
        "of 32",
        p.in);
  }
  if (p.fused_out % 32 != 0) {
    return fmt::format(
        "Output size ({}) not supported by CPUWNA16, supported sizes are "
        "multiples of 32",
        p.fused_out);
  }
  return std::nullopt;
}

// create_weights calls distributed/utils.py verify_group_size_divides_partition after choosing a
// kernel, unless a channel-wise layer is row-parallel (marlin_repeat_scales_on_all_ranks).
std::optional<std::string> GroupsSplitAcrossRanks(const GemmPartition& p) {
  if (p.group_size == -1 && p.row_parallel) return std::nullopt;
  const int64_t group = p.group_size == -1 ? p.full_in : p.group_size;
  if (group <= 0 || p.in % group == 0) return std::nullopt;
  return fmt::format(
      "Weight input_size_per_partition={} for layer '{}' is not divisible by group_size={}. This "
      "happens when tensor_parallel_size splits the layer input into shards that are not a whole "
      "number of quant groups. Consider reducing tensor_parallel_size.",
      p.in, p.vllm_module, group);
}

using Refusal = std::optional<std::string> (*)(const GemmPartition&);
struct Candidate {
  std::string_view kernel;
  Refusal refuses;
};

// kernels/linear/__init__.py choose_mp_linear_kernel over `candidates`, then the groups check.
std::optional<std::string> ChooseWna16(const GemmPartition& p,
                                       std::initializer_list<Candidate> candidates) {
  std::string reasons;
  for (const Candidate& c : candidates) {
    auto why = c.refuses(p);
    if (!why) return GroupsSplitAcrossRanks(p);
    reasons += fmt::format("{}{} cannot implement due to: {}", reasons.empty() ? "" : "; ",
                           c.kernel, *why);
  }
  return "Failed to find a kernel that can implement the WNA16 linear layer. Reasons: " + reasons;
}

// A CUDA GPU: Machete first (Hopper only), then Marlin (sm75+), then Triton W4A16. Conch and
// Humming come after them only with their optional packages installed; Exllama only for float16
// activations (checkpoints here are served as bfloat16).
std::optional<std::string> CudaWna16(const GemmPartition& p) {
  return ChooseWna16(p, {{"MacheteLinearKernel", MacheteRefuses},
                         {"MarlinLinearKernel", MarlinRefuses},
                         {"TritonW4A16LinearKernel", TritonW4A16Refuses}});
}

std::optional<std::string> CpuWna16(const GemmPartition& p) {
  return ChooseWna16(p, {{"CPUWNA16LinearKernel", CpuWna16Refuses}});
}

constexpr std::string_view kWna16Kernels =
    "Hopper (sm90): MacheteLinearKernel (in % 64, fused N % 128, groups -1/64/128), then "
    "MarlinLinearKernel; other GPUs sm75+: MarlinLinearKernel (pads tiles since vllm#45295; "
    "groups -1/32/64/128), then TritonW4A16LinearKernel (4-bit only); CPU build: "
    "CPUWNA16LinearKernel (4-bit only; in and fused N multiples of 32, even groups)";
constexpr std::string_view kWna16Condition =
    "out_features per partition a multiple of 64 and in_features a multiple of 128 (Marlin "
    "before vLLM 0.32)";
constexpr std::string_view kWna16Source =
    "kernels/linear/mixed_precision/marlin.py, machete.py, triton_w4a16.py, cpu.py via "
    "kernels/linear/__init__.py choose_mp_linear_kernel; distributed/utils.py "
    "verify_group_size_divides_partition";

constexpr std::string_view kOddWidthKernels =
    "none: no stock vLLM 0.32 kernel takes 2/3/5/6/7-bit weights on any GPU or on the CPU build "
    "(Machete, Marlin, Conch and Exllama take 4 and 8 bits); on CUDA only HummingLinearKernel, "
    "from the optional `humming` package. The plan still keeps Marlin's old tile rule";

constexpr KernelRule Wna16Row(std::string_view scheme, bool cpu_runs_format) {
  return {.scheme = scheme,
          .kernel = "MarlinLinearKernel",
          .kernels = kWna16Kernels,
          .condition = kWna16Condition,
          .vllm_source = kWna16Source,
          .rule = MarlinTilesBeforePadding,
          .cuda_rule = CudaWna16,
          .cpu_rule = CpuWna16,
          .cpu_runs_format = cpu_runs_format};
}

// uint8 with zero points: fused_moe/oracle/int_wna16.py select_wna16_moe_backend finds no backend
// (Triton's TritonWNA16Experts takes kInt4Static, kInt4StaticAsym and kInt8Static only).
constexpr KernelRule AsymInt8Row() {
  KernelRule row = Wna16Row("w8a16-asym", /*cpu_runs_format=*/false);
  row.moe_builds_nowhere =
      "vLLM builds a MoE layer's routed experts under w8a16-asym with "
      "CompressedTensorsWNA16MoEMethod, and no WNA16 MoE backend takes 8-bit weights with zero "
      "points: \"NotImplementedError: No WNA16 MoE backend supports the deployment "
      "configuration.\" (fused_moe/oracle/int_wna16.py select_wna16_moe_backend; seen with vLLM "
      "0.33.0 and 0.34.0's own model builds)";
  return row;
}

// A pack-quantized width without a vLLM kernel: no per-platform rules (check reports the scheme
// once, not per module), the plan's tile rule as for every pack-quantized row.
constexpr KernelRule NoStockKernelRow(std::string_view scheme) {
  KernelRule row = Wna16Row(scheme, /*cpu_runs_format=*/false);
  row.kernels = kOddWidthKernels;
  row.cuda_rule = nullptr;
  row.cpu_rule = nullptr;
  return row;
}

const std::array<KernelRule, 21> kRules = {{
    Wna16Row("w4a16", true),
    Wna16Row("w4a16-asym", true),
    Wna16Row("w8a16", false),
    AsymInt8Row(),
    NoStockKernelRow("w2a16"),
    NoStockKernelRow("w2a16-asym"),
    NoStockKernelRow("w3a16"),
    NoStockKernelRow("w3a16-asym"),
    NoStockKernelRow("w5a16"),
    NoStockKernelRow("w5a16-asym"),
    NoStockKernelRow("w6a16"),
    NoStockKernelRow("w6a16-asym"),
    NoStockKernelRow("w7a16"),
    NoStockKernelRow("w7a16-asym"),
    {.scheme = "w4afp8",
     .kernel = "CutlassW4A8LinearKernel",
     .kernels = "Hopper (sm90): CutlassW4A8LinearKernel, the only GPU kernel: on Ampere/Ada the "
                "scheme needs capability 90, on Blackwell CUTLASS W4A8 refuses anything but sm90 "
                "(Machete and Marlin take no signed int4); the CPU build has no scheme for int4 "
                "weights with FP8 activations",
     .condition = "K (input columns per partition) and N (the fused GEMM's rows per partition) "
                  "multiples of 128",
     .vllm_source = "kernels/linear/mixed_precision/cutlass.py CutlassW4A8LinearKernel."
                    "can_implement via kernels/linear/__init__.py choose_mp_linear_kernel",
     .rule = CutlassW4A8Tiles,
     .layout_loads_nowhere =
         "model_free_ptq's W4AFP8 layout (int-quantized: int4 values in an I8 `.weight`) loads on "
         "no vLLM release: on Hopper, the one GPU with a kernel, vLLM 0.32-0.34 build it as "
         "CompressedTensorsW4A8Fp8, which reads pack-quantized `weight_packed`/`weight_scale`/"
         "`weight_shape` (\"There is no module or parameter named '...weight'\", seen with "
         "vLLM 0.33.0 and 0.34.0's own weight loaders); vLLM 0.32.0's CPU build finds no scheme "
         "for it (\"NotImplementedError: No compressed-tensors compatible scheme was found\")"},
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

const KernelRule* KernelRuleFor(const QuantScheme& scheme) {
  for (const KernelRule& row : kRules) {
    if (row.scheme == scheme.name) return &row;
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
