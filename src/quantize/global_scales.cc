#include "quantize/global_scales.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/parallel.h"
#include "checkpoint/global_scale_sets.h"
#include "quant/float_formats.h"
#include "safetensors/checkpoint_writer.h"

namespace spk {
namespace {

// The writer's bound on bytes in flight (one block per worker), kept here too.
constexpr int kMaxWorkers = 32;

// The largest |w| of one source tensor, read in kWriterBlockBytes blocks.
Result<float> TensorAbsMax(const SafetensorsReader& reader, const TensorEntry& entry, int threads,
                           const std::atomic<bool>* cancel) {
  const uint64_t total = entry.nbytes();
  const size_t blocks = static_cast<size_t>((total + kWriterBlockBytes - 1) / kWriterBlockBytes);
  const size_t elem = DTypeBits(entry.dtype) / 8;
  std::vector<float> block_max(blocks, 0.0f);
  SPK_RETURN_IF_ERROR(ParallelFor(
      threads, blocks,
      [&](size_t b) -> Status {
        const uint64_t begin = b * kWriterBlockBytes;
        std::vector<uint8_t> buf(std::min(kWriterBlockBytes, total - begin));
        SPK_RETURN_IF_ERROR(reader.ReadTensorBytes(entry, begin, buf));
        block_max[b] = AbsMaxOf(entry.dtype, buf.data(), buf.size() / elem);
        return Status::Ok();
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
    const SafetensorsReader& reader = src.files.shard(src.tensor_shard[i]);
    SPK_ASSIGN_OR_RETURN(float absmax, TensorAbsMax(reader, src.entries[i], workers, cancel));
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
