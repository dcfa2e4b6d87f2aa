#include "quantize/global_scales.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/parallel.h"
#include "model/global_scale_sets.h"
#include "quant/float_formats.h"
#include "quant/simd/float_simd.h"
#include "safetensors/checkpoint_writer.h"
#include "source/source_decode.h"

namespace spk {
namespace {

// The writer's bound on bytes in flight (one block per worker), kept here too.
constexpr int kMaxWorkers = 32;

// The largest |w| of 2-D source tensor `i`, read (decoded, for a pre-quantized source) in row
// blocks of about kWriterBlockBytes.
Result<float> TensorAbsMax(const SourceCheckpoint& src, size_t i, int threads,
                           const std::atomic<bool>* cancel) {
  const TensorMeta& t = src.tensors[i];
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const size_t elem = DTypeBits(t.dtype) / 8;
  const uint64_t row_bytes = static_cast<uint64_t>(cols) * elem;
  const int64_t per_block = std::max<int64_t>(
      1, static_cast<int64_t>(kWriterBlockBytes / std::max<uint64_t>(row_bytes, 1)));
  const size_t blocks = static_cast<size_t>((rows + per_block - 1) / per_block);
  std::vector<float> block_max(blocks, 0.0f);
  SPK_RETURN_IF_ERROR(ParallelFor(
      threads, blocks,
      [&](size_t b) -> Status {
        const int64_t r0 = static_cast<int64_t>(b) * per_block;
        const int64_t n = std::min(per_block, rows - r0);
        return ConsumeSourceRows(src, i, r0, n, [&](std::span<const uint8_t> rows) {
          block_max[b] = simd::AbsMaxOf(t.dtype, rows.data(), rows.size() / elem);
          return Status::Ok();
        });
      },
      cancel));
  return *std::max_element(block_max.begin(), block_max.end());
}

// The set whose members share one NVFP4 global scale: the reference's fused sets
// (GlobalScaleSetKey) or, for a draft or MTP layers the module map names (VllmNaming::
// map_architecture), the module vLLM loads two or more of the quantized tensors into: vLLM keeps
// one global scale per fused Linear, the largest (compressed_tensors_w4a4_nvfp4.py
// process_weights_after_loading), and fuses more than the reference's sets (MLA's q_a_proj and
// kv_a_proj_with_mqa into fused_qkv_a_proj, a checkpoint storing a module both fused and split),
// whose other members would then dequantize wrong. Plain models keep the reference's sets, and
// its bytes; so does a draft's module that vLLM loads from one tensor.
std::string GlobalScaleSet(const QuantPlan& plan, const std::map<std::string, int>& members,
                           size_t i, const TensorMeta& t) {
  const std::string& fused = plan.tensors[i].vllm_module;
  if (plan.naming.map_architecture != nullptr && !fused.empty()) {
    auto it = members.find(fused);
    if (it != members.end() && it->second > 1) return "vllm:" + fused;
  }
  return GlobalScaleSetKey(t.name);
}

}  // namespace

Result<GlobalScales> ComputeGlobalScales(const SourceCheckpoint& src, const QuantPlan& plan,
                                         int threads, const std::atomic<bool>* cancel) {
  const int workers = std::min(ResolveThreadCount(threads), kMaxWorkers);
  std::vector<size_t> quantized;
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    if (plan.tensors[i].action == TensorAction::kQuantize) quantized.push_back(i);
  }
  std::map<std::string, int> members;  // vLLM module -> quantized tensors it loads
  for (size_t i : quantized) ++members[plan.tensors[i].vllm_module];
  std::map<std::string, float> set_absmax;
  for (size_t i : quantized) {
    SPK_ASSIGN_OR_RETURN(float absmax, TensorAbsMax(src, i, workers, cancel));
    float& m = set_absmax[GlobalScaleSet(plan, members, i, src.tensors[i])];
    m = std::max(m, absmax);
  }
  GlobalScales out;
  for (size_t i : quantized) {
    const TensorMeta& t = src.tensors[i];
    out.scales_[i] = NvFp4GlobalScale(set_absmax[GlobalScaleSet(plan, members, i, t)], t.dtype);
  }
  return out;
}

}  // namespace spk
