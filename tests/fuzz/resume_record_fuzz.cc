// libFuzzer target: ParseResumeRecord (quantize --resume's .resume.json) and ParsePartRecord
// (quantize --part's sparkulator-part.json) must never crash or trip a sanitizer, must never
// accept a shard name that could leave the output folder or name the record itself, and what it
// accepts must survive a serialize/parse round trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "safetensors/resume_record.h"

static int FuzzPartRecord(std::string_view text);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  FuzzPartRecord(text);
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

// The part record (quantize --part I/N) shares the shard map and its rules.
static int FuzzPartRecord(std::string_view text) {
  auto record = spk::ParsePartRecord(text, "fuzz.part.json");
  if (!record.ok()) return 0;
  if (record->part < 1 || record->part > record->parts) std::abort();
  for (const auto& [name, shard] : record->shards) {
    if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos) std::abort();
  }
  auto again = spk::ParsePartRecord(spk::SerializePartRecord(*record), "roundtrip");
  if (!again.ok() || again->all_shards != record->all_shards || again->part != record->part) {
    std::abort();
  }
  return 0;
}
