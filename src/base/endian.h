// Little-endian load/store helpers for on-disk formats (safetensors header length, packed int32
// words). sparkulator supports little-endian hosts only (checked at compile time); these make
// intent explicit and avoid unaligned-access UB. Pure functions, thread-safe.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

static_assert(std::endian::native == std::endian::little, "sparkulator needs a little-endian host");

namespace spk {

inline uint64_t LoadLE64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint32_t LoadLE32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint16_t LoadLE16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void StoreLE64(void* p, uint64_t v) { std::memcpy(p, &v, sizeof v); }
inline void StoreLE32(void* p, uint32_t v) { std::memcpy(p, &v, sizeof v); }
inline void StoreLE16(void* p, uint16_t v) { std::memcpy(p, &v, sizeof v); }

}  // namespace spk
