// The codec interface of a quantization format: what one quantized Linear weight is stored as and
// how its rows are quantized and dequantized. Each row of the scheme registry (quant/scheme.h)
// points at one codec; callers (quantize, dequantize, compare, check) ask the codec instead of
// spelling out tensor suffixes, shapes and dtypes themselves.
//
// A quantized module `<m>` replaces `<m>.weight` (rows x cols, row-major, in a float dtype) by the
// tensors Tensors() lists, named `<m>` + suffix. Codecs are stateless singletons that live for the
// whole program: thread-safe, and the pointers and string_views they return never dangle.
// Errors: Validate and the row functions return InvalidInput naming what is wrong (the caller adds
// the file and tensor); undersized buffers are caller bugs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "quant/params.h"
#include "quant/rtn.h"
#include "tensor/dtype.h"

namespace spk {

// What a stored tensor holds, so that writers and readers can find "the scale" without its name.
enum class TensorRole { kPacked, kScale, kShape, kZeroPoint };
inline constexpr size_t kTensorRoleCount = 4;

struct StoredTensor {
  std::string_view suffix;  // appended to the module name: ".weight_packed"
  TensorRole role;
  DType dtype;
  std::vector<int64_t> shape;
};

// How QuantizeRows computes its scales: min-max round-to-nearest (bit-exact with
// compressed-tensors) or the error-minimising scale search (quant/search.h).
enum class QuantMethod { kRtn, kSearch };

class WeightCodec {
 public:
  virtual ~WeightCodec() = default;

  // The compressed-tensors format name this codec writes: "pack-quantized".
  virtual std::string_view format() const = 0;

  // Every suffix this codec may store, whatever the parameters (to recognise a module's tensors).
  virtual std::span<const std::string_view> suffixes() const = 0;

  // Ok when a weight of `rows` x `cols` in `weight_dtype` can be stored with `p`; otherwise
  // InvalidInput saying which rule fails.
  virtual Status Validate(const QuantParams& p, DType weight_dtype, int64_t rows,
                          int64_t cols) const = 0;

  // The tensors that replace the weight, in a fixed order (the writer sorts them for the file).
  // REQUIRES: Validate(p, weight_dtype, rows, cols).ok().
  virtual std::vector<StoredTensor> Tensors(const QuantParams& p, DType weight_dtype, int64_t rows,
                                            int64_t cols) const = 0;

  // Quantizes a block of rows (quant/rtn.h's RowBlockQuantOutput; zero points UNPACKED) with the
  // fastest kernel of `method`. Output bytes do not depend on the CPU.
  virtual Status QuantizeRows(const QuantParams& p, QuantMethod method, DType dtype,
                              const uint8_t* weight, int64_t rows, int64_t cols,
                              const RowBlockQuantOutput& out) const = 0;

  // Dequantizes a block of rows into `out` (rows x cols in `dtype`), exactly as the reference
  // decompressor does. zero_points is UNPACKED or nullptr for symmetric parameters.
  virtual Status DequantizeRows(const QuantParams& p, DType dtype, const int32_t* packed,
                                const uint8_t* scales, const int32_t* zero_points, int64_t rows,
                                int64_t cols, uint8_t* out) const = 0;
};

// The tensor of `tensors` with `role`, or nullptr.
const StoredTensor* FindRole(std::span<const StoredTensor> tensors, TensorRole role);

}  // namespace spk
