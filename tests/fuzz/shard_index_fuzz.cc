// libFuzzer target: ParseShardIndex must never crash or trip a sanitizer, must never accept a shard
// name that could leave the checkpoint folder, and what it accepts must survive a serialize/parse
// round trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "safetensors/index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto index = spk::ParseShardIndex("fuzz.index.json", text);
  if (!index.ok()) return 0;
  for (const auto& [tensor, file] : index->weight_map) {
    if (file.empty() || file == ".." || file.find('/') != std::string::npos) std::abort();
  }
  auto again = spk::ParseShardIndex("roundtrip", spk::SerializeShardIndex(*index));
  if (!again.ok() || again->weight_map != index->weight_map ||
      again->total_size != index->total_size || again->extra_metadata != index->extra_metadata) {
    std::abort();
  }
  return 0;
}
