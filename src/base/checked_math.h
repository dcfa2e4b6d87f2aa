// Overflow-checked integer arithmetic for sizes that come from untrusted headers (shape x dtype,
// offsets). Every function returns false instead of wrapping; callers turn that into an
// InvalidInput Status that names the file and tensor. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <span>

namespace spk {

inline bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
inline bool CheckedMul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// Product of the dimensions (1 for rank 0). False on overflow or a negative dimension.
inline bool CheckedElementCount(std::span<const int64_t> shape, uint64_t* out) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || !CheckedMul(n, static_cast<uint64_t>(d), &n)) return false;
  }
  *out = n;
  return true;
}

// Bytes of `elements` values of `bits` bits each; false on overflow or when the count does not fill
// whole bytes (sub-byte dtypes).
inline bool CheckedByteSize(uint64_t elements, unsigned bits, uint64_t* out) {
  uint64_t total_bits;
  if (!CheckedMul(elements, bits, &total_bits)) return false;
  if (total_bits % 8 != 0) return false;
  *out = total_bits / 8;
  return true;
}

}  // namespace spk
