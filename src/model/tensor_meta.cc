#include "model/tensor_meta.h"

#include <cassert>

#include "base/checked_math.h"

namespace spk {

uint64_t TensorMeta::nbytes() const {
  uint64_t elements = 0, bytes = 0;
  bool ok =
      CheckedElementCount(shape, &elements) && CheckedByteSize(elements, DTypeBits(dtype), &bytes);
  assert(ok && "TensorMeta with an unvalidated shape");
  (void)ok;
  return bytes;
}

}  // namespace spk
