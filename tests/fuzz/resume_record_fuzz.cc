// libFuzzer target: ParseResumeRecord (quantize --resume's .resume.json) must never crash or trip a
// sanitizer, must never accept a shard name that could leave the output folder or name the record
// itself, and what it accepts must survive a serialize/parse round trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "safetensors/resume_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto record = spk::ParseResumeRecord(text, "fuzz.resume.json");
  if (!record.ok()) return 0;
  for (const auto& [name, shard] : record->shards) {
    if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos) std::abort();
    if (shard.hash.size() != 32) std::abort();
  }
  auto again = spk::ParseResumeRecord(spk::SerializeResumeRecord(*record), "roundtrip");
  if (!again.ok() || again->job != record->job || again->shards.size() != record->shards.size()) {
    std::abort();
  }
  return 0;
}
