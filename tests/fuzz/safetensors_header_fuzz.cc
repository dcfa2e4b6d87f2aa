// libFuzzer target: ParseSafetensorsHeader must never crash, hang or trip a sanitizer on any header
// text and claimed file size, and anything it accepts must satisfy the invariants readers rely on.
// Input: 8 bytes of file-size slack (little-endian), then the header JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "base/endian.h"
#include "safetensors/header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  const uint64_t slack = spk::LoadLE64(data) % 4096;
  std::string_view json(reinterpret_cast<const char*>(data + 8), size - 8);
  const uint64_t file_size = 8 + json.size() + slack;
  auto header = spk::ParseSafetensorsHeader("fuzz.safetensors", json, file_size);
  if (!header.ok()) return 0;
  // Accepted headers tile [data_start, file_size) exactly, in order.
  uint64_t cursor = 0;
  for (const spk::TensorEntry& t : header->tensors) {
    if (t.begin != cursor || t.end < t.begin) std::abort();
    (void)t.num_elements();
    cursor = t.end;
  }
  if (header->data_start + cursor != file_size) std::abort();
  return 0;
}
