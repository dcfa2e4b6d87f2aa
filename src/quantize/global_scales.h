// The first pass of a format with per-tensor global scales (NVFP4): every quantized weight is
// read block by block (never held whole), its absolute maximum pooled over its fused set (q/k/v,
// gate/up: model/global_scale_sets.h, partners in any shard), and each weight gets the
// set's weight_global_scale (quant/float_formats.h NvFp4GlobalScale), as llm-compressor's
// model_free_ptq computes it.
//
// Values only once computed; ComputeGlobalScales runs on up to `threads` workers with the same
// cap on bytes in flight as the writer. Errors: the readers' IoError/InvalidInput, Cancelled.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>

#include "base/status.h"
#include "plan/plan.h"
#include "source/source.h"

namespace spk {

class GlobalScales {
 public:
  // The global scale of source tensor `index`, or 0 for a tensor that has none.
  float For(size_t index) const {
    auto it = scales_.find(index);
    return it == scales_.end() ? 0.0f : it->second;
  }

 private:
  friend Result<GlobalScales> ComputeGlobalScales(const SourceCheckpoint&, const QuantPlan&, int,
                                                  const std::atomic<bool>*);
  std::map<size_t, float> scales_;  // source tensor index -> weight_global_scale
};

// The global scale of every tensor `plan` quantizes.
Result<GlobalScales> ComputeGlobalScales(const SourceCheckpoint& src, const QuantPlan& plan,
                                         int threads, const std::atomic<bool>* cancel);

}  // namespace spk
