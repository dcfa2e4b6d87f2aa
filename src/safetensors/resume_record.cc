#include "safetensors/resume_record.h"

#include <nlohmann/json.hpp>

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kVersion = 1;

bool IsHash(const Json& j) {
  if (!j.is_string() || j.get<std::string>().size() != 32) return false;
  for (char c : j.get<std::string>()) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

Result<ResumeRecord> ParseResumeRecord(std::string_view text, std::string_view path) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidInput(std::string(path) + ": not a resume record of this version (" +
                                std::string(why) + ")");
  };
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (!j.contains("version") || j["version"] != kVersion) return bad("version");
  if (!j.contains("job") || !IsHash(j["job"])) return bad("job");
  if (!j.contains("shards") || !j["shards"].is_object()) return bad("shards");
  ResumeRecord record;
  record.job = j["job"].get<std::string>();
  for (const auto& [name, shard] : j["shards"].items()) {
    if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
      return bad("shard name '" + name + "'");
    }
    if (!shard.is_object() || !shard.contains("size") || !shard["size"].is_number_unsigned() ||
        !shard.contains("xxh3_128") || !IsHash(shard["xxh3_128"])) {
      return bad("shard '" + name + "'");
    }
    record.shards[name] = {shard["size"].get<uint64_t>(), shard["xxh3_128"].get<std::string>()};
  }
  return record;
}

std::string SerializeResumeRecord(const ResumeRecord& record) {
  Json shards = Json::object();
  for (const auto& [name, shard] : record.shards) {
    shards[name] = Json{{"size", shard.size}, {"xxh3_128", shard.hash}};
  }
  return Json{{"version", kVersion}, {"job", record.job}, {"shards", shards}}.dump(1) + "\n";
}

}  // namespace spk
