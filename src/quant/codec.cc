#include "quant/codec.h"

namespace spk {

const StoredTensor* FindRole(std::span<const StoredTensor> tensors, TensorRole role) {
  for (const StoredTensor& t : tensors) {
    if (t.role == role) return &t;
  }
  return nullptr;
}

}  // namespace spk
