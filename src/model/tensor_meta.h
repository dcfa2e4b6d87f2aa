// A tensor of a checkpoint as the planner and the readers see it: its name, dtype and shape,
// and for a 2-D expert weight split from a fused 3-D tensor the fused tensor's name.
//
// A value type; thread-safe to share. nbytes() asserts a validated shape (no errors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace spk {

struct TensorMeta {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  // The fused 3-D expert tensor this 2-D weight was split from (model/moe.h), else empty.
  std::string split_from;
  // Bytes of the tensor's data. REQUIRES: a shape the safetensors parser (or the plan) validated,
  // so the product cannot overflow.
  uint64_t nbytes() const;
};

}  // namespace spk
