// The codec interface of a quantization format: what one quantized Linear weight is stored as and
// how its rows are quantized and dequantized. Each row of the scheme registry (quant/scheme.h)
// points at one codec; callers (quantize, dequantize, compare, check) ask the codec instead of
// spelling out tensor suffixes, shapes and dtypes themselves.
//
// A quantized module `<m>` replaces `<m>.weight` (rows x cols, row-major, in a float dtype) by the
// tensors Tensors() lists, named `<m>` + suffix. Every stored tensor is a byte array: a row block
// of the weight produces the matching rows of each row-wise tensor (RowBlockBytes), so the codec
// interface is the same for int32-packed, F8, I8 and U8-packed formats. Codecs are stateless
// singletons that live for the whole program: thread-safe, and the pointers and string_views they
// return never dangle. Errors: Validate and the row functions return InvalidInput naming what is
// wrong (the caller adds the file and tensor); undersized buffers are caller bugs.
#pragma once

#include <array>
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
// kPacked is the quantized values (`weight_packed`, or `weight` for F8/I8 formats); kGlobalScale
// the per-tensor `weight_global_scale` of NVFP4.
enum class TensorRole { kPacked, kScale, kShape, kZeroPoint, kGlobalScale };
inline constexpr size_t kTensorRoleCount = 5;

struct StoredTensor {
  std::string_view suffix;  // appended to the module name: ".weight_packed"
  TensorRole role;
  DType dtype;
  std::vector<int64_t> shape;
  // Weight rows per stored row: 1 for row-wise tensors, 128 for FP8 block scales; 0 for a tensor
  // written once per weight (weight_shape, weight_global_scale, packed zero points).
  int64_t weight_rows_per_row = 1;
};

// Where QuantizeRows writes (and DequantizeRows reads) one row block: for each role, the first
// byte of the block's rows of that stored tensor (row r0 / weight_rows_per_row), or nullptr for
// roles the format does not store per row. kZeroPoint is the exception: an UNPACKED int32 rows x
// groups array, packed across rows by the caller once the tensor is done (PackZeroPoints).
struct RowBlockBytes {
  std::array<uint8_t*, kTensorRoleCount> at{};
  uint8_t*& operator[](TensorRole role) { return at[static_cast<size_t>(role)]; }
  uint8_t* operator[](TensorRole role) const { return at[static_cast<size_t>(role)]; }
};

// How QuantizeRows computes its scales: min-max round-to-nearest (bit-exact with
// compressed-tensors) or the error-minimising scale search (quant/search.h).
enum class QuantMethod { kRtn, kSearch };
// "rtn" / "search": the --method values and what the quantization record writes.
std::string_view QuantMethodName(QuantMethod method);
// Usage error naming the value and the choices for anything else.
Result<QuantMethod> ParseQuantMethod(std::string_view name);

class WeightCodec {
 public:
  virtual ~WeightCodec() = default;

  // The compressed-tensors format name this codec writes: "pack-quantized".
  virtual std::string_view format() const = 0;

  // Every suffix this codec may store, whatever the parameters (to recognise a module's tensors);
  // the first is the tensor that holds the values (TensorRole::kPacked).
  virtual std::span<const std::string_view> suffixes() const = 0;

  // Ok when a weight of `rows` x `cols` in `weight_dtype` can be stored with `p`; otherwise
  // InvalidInput saying which rule fails.
  virtual Status Validate(const QuantParams& p, DType weight_dtype, int64_t rows,
                          int64_t cols) const = 0;

  // The tensors that replace the weight, in a fixed order (the writer sorts them for the file).
  // REQUIRES: Validate(p, weight_dtype, rows, cols).ok().
  virtual std::vector<StoredTensor> Tensors(const QuantParams& p, DType weight_dtype, int64_t rows,
                                            int64_t cols) const = 0;

  // Row blocks handed to QuantizeRows/DequantizeRows start at a multiple of this many rows (128
  // for FP8 blocks: a block scale covers 128 rows); 1 for row-wise formats.
  virtual int64_t RowAlignment() const { return 1; }

  // True when QuantizeRows takes QuantMethod::kSearch (the error-minimising scale search).
  virtual bool SupportsSearch() const { return false; }

  // True when the format stores a per-tensor global scale (NVFP4): the caller computes it over
  // the weight and its fused partners first (GlobalScaleFor) and passes it to every row block.
  virtual bool HasGlobalScale() const { return false; }

  // The dtype DequantizeRows writes for a weight stored from `weight_dtype`: the weight's own for
  // most formats; compressed-tensors decompresses the FP4 formats to BF16 whatever the source.
  virtual DType DequantizedDType(DType weight_dtype) const { return weight_dtype; }

  // Quantizes a block of `rows` rows (a multiple of RowAlignment() apart from the tensor's last
  // block) with the fastest kernel of `method`, writing each row-wise stored tensor's rows to
  // `out`. `global_scale` is the tensor's weight_global_scale (HasGlobalScale), else ignored.
  // Output bytes do not depend on the CPU.
  virtual Status QuantizeRows(const QuantParams& p, QuantMethod method, DType dtype,
                              const uint8_t* weight, int64_t rows, int64_t cols, float global_scale,
                              const RowBlockBytes& out) const = 0;

  // Dequantizes a block of rows stored at `in` into `out` (rows x cols in
  // DequantizedDType(dtype)), exactly as the reference decompressor does. `dtype` is the dtype
  // the scales were stored in for formats that store them in the weight's dtype.
  virtual Status DequantizeRows(const QuantParams& p, DType dtype, const RowBlockBytes& in,
                                float global_scale, int64_t rows, int64_t cols,
                                uint8_t* out) const = 0;
};

// The checks every codec's Validate starts with: parameters sparkulator writes, a BF16/F16/F32
// weight, positive dimensions, and (unless `partial_groups`) columns a multiple of the group size.
// InvalidInput saying which fails.
Status ValidateWeight(const QuantParams& p, DType weight_dtype, int64_t rows, int64_t cols,
                      bool partial_groups);

// The tensor of `tensors` with `role`, or nullptr.
const StoredTensor* FindRole(std::span<const StoredTensor> tensors, TensorRole role);

}  // namespace spk
