// Test-only helpers shared by the SIMD kernel tests (not compiled into any library): encode weights
// in a dtype, run a row quantizer into freshly poisoned output buffers, and the step of sweeps.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "base/status.h"
#include "quant/params.h"
#include "quant/rtn.h"
#include "tensor/dtype.h"
#include "tensor/float_convert.h"

namespace spk::test_util {

// Every width the int kernels take (params.h kMinIntBits..kMaxIntBits): 4 and 8 have SIMD packers,
// the others straddle words and go through the scalar bit-stream packer.
inline constexpr int kIntBits[] = {2, 3, 4, 5, 6, 7, 8};

inline std::vector<uint8_t> Encode(DType dtype, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * DTypeBits(dtype) / 8);
  ConvertFromFloat(dtype, values.data(), bytes.data(), values.size());
  return bytes;
}

// The awkward weights both kernel tests feed, by group kind: 1 outliers, 2 all zero, 3 signed
// zeros only, 4 subnormals (F16/F32; tiny normals in BF16). `v` is a typical weight (sd ~0.02),
// `i` the index in the group; other kinds return `v` unchanged for the caller's own cases.
inline float AwkwardWeight(int kind, int64_t i, DType dtype, float v) {
  switch (kind) {
    case 1:
      return i % 17 == 3 ? v * 300.0f : v;
    case 2:
      return 0.0f;
    case 3:
      return (i % 2) ? -0.0f : 0.0f;
    case 4:
      return dtype == DType::kF32 ? v * 1e-6f * 1e-33f : v * 1e-6f;
    default:
      return v;
  }
}

struct QuantizerOutput {
  std::vector<int32_t> packed;
  std::vector<uint8_t> scales;
  std::vector<int32_t> zero_points;
  Status status;
};

using QuantizeFn = Status (*)(const QuantParams&, DType, const uint8_t*, int64_t, int64_t,
                              const RowBlockQuantOutput&);

// Runs `fn` on `rows` x `cols` weights into buffers filled with a recognizable pattern, so that a
// kernel that skips a write differs from the reference.
inline QuantizerOutput RunQuantizer(QuantizeFn fn, const QuantParams& p, DType dtype,
                                    const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols) {
  QuantizerOutput out;
  // Room for a group size that does not divide the row too (the quantizer must refuse it unread).
  const int64_t groups = GroupFits(cols, p.group_size) ? GroupsPerRow(cols, p.group_size) : cols;
  out.packed.assign(rows * PackedWords(cols, p.bits), 0x5A5A5A5A);
  out.scales.assign(rows * groups * DTypeBits(dtype) / 8, 0xA5);
  out.zero_points.assign(rows * groups, 12345);
  out.status =
      fn(p, dtype, bytes.data(), rows, cols,
         {out.packed.data(), out.scales.data(), p.symmetric ? nullptr : out.zero_points.data()});
  return out;
}

// The step of a sweep over 16-bit patterns: `stride` in a release build, every pattern with
// SPK_EXHAUSTIVE=1 in the environment, and 8 times sparser under the sanitizers, whose run is
// there for memory and undefined behaviour (the release run covers the values) and runs the
// kernels at -O0.
inline uint32_t SweepStride(uint32_t stride) {
  const char* exhaustive = std::getenv("SPK_EXHAUSTIVE");
  if (exhaustive != nullptr && exhaustive[0] == '1') return 1;
#if defined(__SANITIZE_ADDRESS__)
  return stride * 8;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return stride * 8;
#endif
#endif
  return stride;
}

}  // namespace spk::test_util
