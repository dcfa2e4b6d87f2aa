// `sparkulator merge DST PART...`: the parts of one quantize job split across machines
// (quantize --part I/N, each writing its shards, the index, config.json, the other files and a
// part record, safetensors/resume_record.h PartRecord) made into the checkpoint one machine would
// have written, byte for byte. Before anything is written the parts are checked: each holds a part
// record; all are of one job (the same job hash: the same source, options and planned layout) and
// one N; every part 1..N is given once; every shard of the output was written by exactly one part
// and still has the size and content hash its part recorded; config.json and the index agree.
// DST is then written through CheckpointWriter (shards and files copied into a temporary folder,
// fsynced unless kPageCache, renamed), so a failure leaves nothing behind. The parts are read only.
//
// Errors: Usage for no part; NotFound for a missing part folder or record; InvalidInput naming the
// part and the file for anything that does not fit; AlreadyExists for a non-empty DST without
// force; the file system's IoError naming the path.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/file.h"
#include "io/run_context.h"

namespace spk {

struct MergeOptions {
  std::string destination;
  std::vector<std::string> parts;  // part folders, any order
  bool force = false;
  Durability durability = Durability::kSynced;
};

struct MergeSummary {
  std::string destination;
  int parts = 0;
  size_t shards = 0;
  uint64_t shard_bytes = 0;
  std::vector<std::string> copied_files;  // besides the shards, relative to a part
};

Result<MergeSummary> MergeParts(const RunContext& run, const MergeOptions& options);

// What `merge --json` prints (and the Python package's MergeSummary holds).
nlohmann::ordered_json MergeSummaryToJson(const MergeSummary& summary);

}  // namespace spk
