#include "safetensors/resume_record.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "io/content_hash.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kVersion = 1;

bool IsHash(const Json& j) { return j.is_string() && IsContentHash(j.get<std::string>()); }

// A shard file name a record may hold: one plain name inside the folder, not the record's own.
bool IsShardName(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name[0] != '.' &&
         name != kPartRecordFile;
}

using ShardMap = std::map<std::string, ResumeRecord::Shard>;

// The "shards" object of either record; "" on success, else what is wrong.
std::string ParseShards(const Json& j, ShardMap* out) {
  if (!j.is_object()) return "shards";
  for (const auto& [name, shard] : j.items()) {
    if (!IsShardName(name)) return "shard name '" + name + "'";
    if (!shard.is_object() || !shard.contains("size") || !shard["size"].is_number_unsigned() ||
        !shard.contains("xxh3_128") || !IsHash(shard["xxh3_128"])) {
      return "shard '" + name + "'";
    }
    (*out)[name] = {shard["size"].get<uint64_t>(), shard["xxh3_128"].get<std::string>()};
  }
  return "";
}

Json ShardsJson(const ShardMap& shards) {
  Json out = Json::object();
  for (const auto& [name, shard] : shards) {
    out[name] = Json{{"size", shard.size}, {"xxh3_128", shard.hash}};
  }
  return out;
}

// The object of `text` when it has this version and a job hash, else InvalidInput naming `path`.
Result<Json> ParseRecordObject(std::string_view text, std::string_view path,
                               std::string_view what) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::string wrong = j.is_discarded() || !j.is_object()                   ? "not a JSON object"
                      : !j.contains("version") || j["version"] != kVersion ? "version"
                      : !j.contains("job") || !IsHash(j["job"])            ? "job"
                                                                           : "";
  if (!wrong.empty()) {
    return Status::InvalidInput(std::string(path) + ": not a " + std::string(what) +
                                " of this version (" + wrong + ")");
  }
  return j;
}

}  // namespace

Result<ResumeRecord> ParseResumeRecord(std::string_view text, std::string_view path) {
  SPK_ASSIGN_OR_RETURN(Json j, ParseRecordObject(text, path, "resume record"));
  ResumeRecord record;
  record.job = j["job"].get<std::string>();
  if (std::string wrong = ParseShards(j.value("shards", Json()), &record.shards); !wrong.empty()) {
    return Status::InvalidInput(std::string(path) + ": not a resume record of this version (" +
                                wrong + ")");
  }
  return record;
}

std::string SerializeResumeRecord(const ResumeRecord& record) {
  return Json{{"version", kVersion}, {"job", record.job}, {"shards", ShardsJson(record.shards)}}
             .dump(1) +
         "\n";
}

Result<PartRecord> ParsePartRecord(std::string_view text, std::string_view path) {
  SPK_ASSIGN_OR_RETURN(Json j, ParseRecordObject(text, path, "part record"));
  auto bad = [&](const std::string& why) {
    return Status::InvalidInput(std::string(path) + ": not a part record of this version (" + why +
                                ")");
  };
  PartRecord record;
  record.job = j["job"].get<std::string>();
  const Json& part = j.value("part", Json());
  const Json& parts = j.value("parts", Json());
  if (!parts.is_number_integer() || parts.get<int64_t>() < 1 || parts.get<int64_t>() > 100000 ||
      !part.is_number_integer() || part.get<int64_t>() < 1 || part > parts) {
    return bad("part, parts");
  }
  record.part = part.get<int>();
  record.parts = parts.get<int>();
  const Json& all = j.value("all_shards", Json());
  if (!all.is_array()) return bad("all_shards");
  for (const Json& name : all) {
    if (!name.is_string() || !IsShardName(name.get<std::string>())) return bad("all_shards");
    record.all_shards.push_back(name.get<std::string>());
  }
  if (std::string wrong = ParseShards(j.value("shards", Json()), &record.shards); !wrong.empty()) {
    return bad(wrong);
  }
  for (const auto& [name, shard] : record.shards) {
    if (std::find(record.all_shards.begin(), record.all_shards.end(), name) ==
        record.all_shards.end()) {
      return bad("shard '" + name + "' is not among all_shards");
    }
  }
  return record;
}

std::string SerializePartRecord(const PartRecord& record) {
  return Json{{"version", kVersion},
              {"job", record.job},
              {"part", record.part},
              {"parts", record.parts},
              {"all_shards", record.all_shards},
              {"shards", ShardsJson(record.shards)}}
             .dump(1) +
         "\n";
}

}  // namespace spk
