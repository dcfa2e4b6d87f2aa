// vLLM 0.32's kernel shape rules for the formats that are not pack-quantized (FP8_DYNAMIC,
// FP8_BLOCK, W8A8, W4AFP8, NVFP4A16, MXFP4A16, MXFP8A16): one table (kernel_rules.cc), a row per
// scheme row of quant/scheme.h, naming the GPU kernels vLLM picks on each GPU generation, the vLLM
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
// The plan keeps a module dense when its row's rule fails (plan.h SchemeKernelRuleViolation) and
// `check` reports the same rule as a `kernel-rule` finding, so quantize and check agree.
// tests/python/test_kernel_rules.py calls vLLM's own functions on both sides of every boundary.
//
// Constant data and pure functions; thread-safe. No errors: a broken rule is a value.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace spk {

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
};

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
};

// Every row, in the scheme registry's order.
std::span<const KernelRule> AllKernelRules();
// The row of the scheme named `scheme`, or nullptr (the pack-quantized rows: plan.h
// KernelRuleViolation holds their Marlin rules).
const KernelRule* KernelRuleFor(std::string_view scheme);

// What `check` and the plan say when the row's rule fails for `p` (the partition's shape, the rule,
// the kernel, vLLM's message and where vLLM raises it), else nullopt.
std::optional<std::string> KernelRuleBreak(const KernelRule& row, const GemmPartition& p);

}  // namespace spk
