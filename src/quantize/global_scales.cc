#include "quantize/global_scales.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/parallel.h"
#include "checkpoint/global_scale_sets.h"
#include "checkpoint/source_decode.h"
#include "quant/float_formats.h"
#include "quant/simd/float_simd.h"
#include "safetensors/checkpoint_writer.h"

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

}  // namespace

Result<GlobalScales> ComputeGlobalScales(const SourceCheckpoint& src, const QuantPlan& plan,
                                         int threads, const std::atomic<bool>* cancel) {
  const int workers = std::min(ResolveThreadCount(threads), kMaxWorkers);
  std::vector<size_t> quantized;
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    if (plan.tensors[i].action == TensorAction::kQuantize) quantized.push_back(i);
  }
  std::map<std::string, float> set_absmax;
  for (size_t i : quantized) {
    SPK_ASSIGN_OR_RETURN(float absmax, TensorAbsMax(src, i, workers, cancel));
    float& m = set_absmax[GlobalScaleSetKey(src.tensors[i].name)];
    m = std::max(m, absmax);
  }
  GlobalScales out;
  for (size_t i : quantized) {
    const TensorMeta& t = src.tensors[i];
    out.scales_[i] = NvFp4GlobalScale(set_absmax[GlobalScaleSetKey(t.name)], t.dtype);
  }
  return out;
}

}  // namespace spk
