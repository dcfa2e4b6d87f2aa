// vLLM's kernel shape rules for every scheme row of quant/scheme.h (the float and int8 formats
// FP8_DYNAMIC, FP8_BLOCK, W8A8, W4AFP8, NVFP4A16, MXFP4A16, MXFP8A16 and the integer
// pack-quantized W4A16/W8A16, symmetric and asymmetric): one table (kernel_rules.cc), a row per
// scheme, naming the kernels vLLM picks on each GPU generation and on its CPU build, the vLLM
// function that states the shape rule and the message vLLM raises when a Linear breaks it.
//
// A row has a rule only where vLLM fails to load the module: vLLM 0.32 chooses the first kernel
// whose can_implement() takes the layer and falls back to the next (Marlin, Triton, emulation), and
// its Marlin FP4/FP8 and FlashInfer/CUTLASS FP4 paths zero-pad any shape (marlin_utils.py
// marlin_padded_nk, nvfp4_utils.py pad_nvfp4_weight_for_cutlass). So for most formats the shape
// decides only the speed, and the row says so (`rule` is null). The rules hold on every GPU
// generation where the format loads at all, so the plan applies them whatever the GPU; the CPU
// build of vLLM may take more (see the rows).
//
// The plan keeps a module dense when its row's rule fails and `check` reports the same rule as a
// `kernel-rule` finding, so quantize and check agree: both ask vllm/gemm.h JudgeGemm, which
// splits the layer per rank and applies the row.
//
// Pack-quantized rows (WNA16) carry two rules. `rule` is Marlin's tile rule from before vLLM
// padded Marlin's tiles (vllm#45295): out per partition a multiple of 64, in a multiple of 128.
// The plan keeps applying it, stricter than vLLM 0.32 needs, because a checkpoint should load on
// older releases too, on the CPU build (multiples of 32) and on Hopper's fast path (Machete:
// in % 64, fused N % 128) rather than on padded Marlin; `check` judges releases before
// kFirstPaddedMarlinVllm by it. `cuda_rule` and `cpu_rule` are what vLLM 0.32 does on each
// platform: its WNA16 kernel chooser over the platform's kernels, then the scheme's
// whole-groups-per-rank check; `check` reports an error only where both refuse.
// tests/python/test_kernel_rules.py calls vLLM's own functions on both sides of every boundary.
// The 2/3/5/6/7-bit rows have no kernel at all (an explicit "no stock kernel" row): only the
// plan's tile rule, no per-platform rules.
//
// Constant data and pure functions; thread-safe. No errors: a broken rule is a value.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace spk {

struct QuantScheme;

// One Linear as vLLM builds it on one tensor-parallel rank.
struct GemmPartition {
  std::string_view module;        // checkpoint module name
  std::string_view vllm_module;   // the (fused) vLLM module it loads into
  int64_t out = 0;                // this module's output rows on the rank
  int64_t in = 0;                 // input columns on the rank
  int64_t fused_out = 0;          // output rows of the whole fused GEMM on the rank (N)
  bool last_fused_member = true;  // v of q/k/v, up of gate/up, or a module that is not fused
  bool rows_split = false;        // --tp > 1 splits the rows (a column-parallel layer)
  int tp = 1;
  // Pack-quantized rows only: the layer's input columns on all ranks, and its arguments.
  int64_t full_in = 0;
  int bits = 4;
  bool symmetric = true;
  int64_t group_size = -1;  // -1: channel-wise
  bool row_parallel = false;
};

// The first vLLM release whose Marlin zero-pads misaligned tiles (vllm#45295, merged
// 2026-06-11). Verified in 0.32.0's source (kernels/linear/mixed_precision/marlin.py: "Tile
// misalignment is fixed by zero-padding at weight prep"); releases 0.24-0.31 are said to carry it
// too but were not read, so check keeps the old rule for them (an assumption; docs/check.md).
inline constexpr std::string_view kFirstPaddedMarlinVllm = "0.32.0";

struct KernelRule {
  std::string_view scheme;  // the scheme row's name ("w4afp8")
  // The kernel (or check) whose rule this is, "" for a row without a rule.
  std::string_view kernel;
  // The kernels vLLM 0.32 picks for the row, per GPU generation, in its priority order.
  std::string_view kernels;
  // The shape condition in words, or how vLLM takes any shape when `rule` is null.
  std::string_view condition;
  std::string_view vllm_source;  // the vLLM file and function that state the condition
  // vLLM's error for `p`, or nullopt when a kernel takes it. Null for a row without a rule.
  std::optional<std::string> (*rule)(const GemmPartition& p);
  // Pack-quantized rows only (else null): vLLM 0.32's error for `p` on any CUDA GPU (the chooser's
  // reasons, or the whole-groups check) and on the CPU build, or nullopt when a kernel takes it.
  std::optional<std::string> (*cuda_rule)(const GemmPartition& p) = nullptr;
  std::optional<std::string> (*cpu_rule)(const GemmPartition& p) = nullptr;
  // False where the CPU build has no kernel for the format at any shape (CPUWNA16 takes 4-bit
  // only): check then says nothing per module about the CPU.
  bool cpu_runs_format = true;
  // Why no vLLM release loads the layout the row writes (the reference's, model_free_ptq's), or
  // "" when one does: the plan refuses the scheme without --allow-unloadable, and check reports
  // layout-loads-nowhere. Seen on vLLM, each platform's words quoted.
  std::string_view layout_loads_nowhere;
  // Why vLLM builds no routed experts under the row's scheme, or "" when a MoE backend takes them:
  // a MoE layer's experts are built under the checkpoint's scheme (CompressedTensorsWNA16MoEMethod
  // for pack-quantized), whether or not the checkpoint quantized them, so the plan refuses the
  // scheme for an architecture with routed experts and check reports it (vllm/map_rules.h
  // MoeRefusalFor). Seen on vLLM, its words quoted.
  std::string_view moe_builds_nowhere;
};

// Every row, in the scheme registry's order.
std::span<const KernelRule> AllKernelRules();
// The row of `scheme`. Every scheme row has one (kernel_rules_test.cc OneRowPerScheme): a width
// without a vLLM kernel has a row that says so.
const KernelRule* KernelRuleFor(const QuantScheme& scheme);

// What `check` and the plan say when the row's rule fails for `p` (the partition's shape, the rule,
// the kernel, vLLM's message and where vLLM raises it), else nullopt.
std::optional<std::string> KernelRuleBreak(const KernelRule& row, const GemmPartition& p);

}  // namespace spk
