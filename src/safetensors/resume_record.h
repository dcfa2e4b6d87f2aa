// The record a resumable checkpoint write (quantize --resume) keeps in its unfinished output
// folder,
// `.resume.json`: which job the folder belongs to (a content hash of everything that decides the
// bytes written: the caller's identity of its source and options, every shard's planned header,
// every other file) and, for each output shard finished, its size and content hash
// (io/content_hash.h), recorded only after the shard was written whole. A later run of the same job
// reuses a recorded shard only when the file on disk still has that size and hash; anything else
// is written again. The record is replaced atomically (write `.resume.json.next`, rename), so a
// kill at any moment leaves the previous record or the new one, never half of one.
//
// Values and pure functions; thread-safe. Errors: ParseResumeRecord returns InvalidInput naming the
// file for anything that is not a record this version wrote (the writer then starts afresh).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spk {

inline constexpr std::string_view kResumeRecordFile = ".resume.json";
inline constexpr std::string_view kResumeRecordNextFile = ".resume.json.next";

struct ResumeRecord {
  struct Shard {
    uint64_t size = 0;
    std::string hash;  // io/content_hash.h: 32 hex digits
  };
  std::string job;                      // content hash of the job (see above)
  std::map<std::string, Shard> shards;  // by shard file name
};

Result<ResumeRecord> ParseResumeRecord(std::string_view text, std::string_view path);
std::string SerializeResumeRecord(const ResumeRecord& record);

// The record a part of a split job (quantize --part I/N) writes beside its shards,
// `sparkulator-part.json`, for `sparkulator merge`: the job (the same hash as above, which does not
// depend on I), which part of how many, every shard of the whole output, and the shards this part
// wrote with their sizes and content hashes.
inline constexpr std::string_view kPartRecordFile = "sparkulator-part.json";
struct PartRecord {
  std::string job;
  int part = 0;                                       // 1-based
  int parts = 0;                                      // N
  std::vector<std::string> all_shards;                // the whole output's, in index order
  std::map<std::string, ResumeRecord::Shard> shards;  // written by this part
};
Result<PartRecord> ParsePartRecord(std::string_view text, std::string_view path);
std::string SerializePartRecord(const PartRecord& record);

}  // namespace spk
