#include "quantize/merge.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>

#include "io/content_hash.h"
#include "safetensors/checkpoint_writer.h"
#include "safetensors/index.h"
#include "safetensors/resume_record.h"
#include "source/other_files.h"

namespace spk {
namespace {

struct LoadedPart {
  std::string dir;
  PartRecord record;
};

Result<LoadedPart> LoadPart(FileSystem* fs, const std::string& dir) {
  const std::string path = dir + "/" + std::string(kPartRecordFile);
  if (fs->KindOf(path) != FileKind::kFile) {
    return Status::NotFound(fmt::format(
        "{} is not a part of a split job: it has no {} (parts are written by sparkulator quantize "
        "SRC PART --part I/N)",
        dir, kPartRecordFile));
  }
  SPK_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path));
  SPK_ASSIGN_OR_RETURN(PartRecord record, ParsePartRecord(text, path));
  return LoadedPart{dir, std::move(record)};
}

// The parts, by their number, once they are one job's parts 1..N each given once.
Result<std::vector<const LoadedPart*>> OrderParts(const std::vector<LoadedPart>& parts) {
  const LoadedPart& first = parts.front();
  std::vector<const LoadedPart*> by_number(first.record.parts, nullptr);
  for (const LoadedPart& p : parts) {
    if (p.record.job != first.record.job || p.record.parts != first.record.parts ||
        p.record.all_shards != first.record.all_shards) {
      return Status::InvalidInput(fmt::format(
          "{} and {} are parts of different jobs (another source, other options or another "
          "sparkulator): rerun the parts with the same command",
          first.dir, p.dir));
    }
    const LoadedPart*& slot = by_number[p.record.part - 1];
    if (slot != nullptr) {
      return Status::InvalidInput(fmt::format("part {} of {} is given twice: {} and {}",
                                              p.record.part, p.record.parts, slot->dir, p.dir));
    }
    slot = &p;
  }
  for (size_t i = 0; i < by_number.size(); ++i) {
    if (by_number[i] == nullptr) {
      return Status::InvalidInput(fmt::format(
          "part {} of {} is missing: give every part's folder (run quantize --part {}/{} for it)",
          i + 1, by_number.size(), i + 1, by_number.size()));
    }
  }
  return by_number;
}

// The part that wrote each shard, checked: one part each, its recorded size and hash on disk.
Result<std::map<std::string, const LoadedPart*>> LocateShards(
    FileSystem* fs, const std::vector<const LoadedPart*>& parts, uint64_t* bytes) {
  std::map<std::string, const LoadedPart*> where;
  for (const LoadedPart* p : parts) {
    for (const auto& [name, shard] : p->record.shards) {
      if (auto [it, added] = where.emplace(name, p); !added) {
        return Status::InvalidInput(
            fmt::format("{} is written by two parts: {} and {}", name, it->second->dir, p->dir));
      }
      const std::string path = p->dir + "/" + name;
      SPK_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, fs->OpenForRead(path));
      if (file->size() != shard.size) {
        return Status::InvalidInput(fmt::format(
            "{} has {} bytes, but part {} recorded {} (truncated or replaced): rerun that part",
            path, file->size(), p->record.part, shard.size));
      }
      SPK_ASSIGN_OR_RETURN(std::string hash, HashFile(fs, path));
      if (hash != shard.hash) {
        return Status::InvalidInput(fmt::format(
            "{} changed after part {} wrote it (its content hash differs from the part record): "
            "rerun that part",
            path, p->record.part));
      }
      *bytes += shard.size;
    }
  }
  for (const std::string& name : parts.front()->record.all_shards) {
    if (!where.count(name)) {
      return Status::InvalidInput(
          fmt::format("no part wrote {}: the part records do not cover the output", name));
    }
  }
  return where;
}

// config.json and the index must be the same text in every part (the job hash covers what they
// were planned to be; this catches one edited since).
Status CheckSharedFiles(FileSystem* fs, const std::vector<const LoadedPart*>& parts) {
  for (std::string_view name : {std::string_view("config.json"), kShardIndexFileName}) {
    // A job of one source shard has no index: then no part may have one.
    const bool expected =
        name != kShardIndexFileName ||
        fs->KindOf(parts.front()->dir + "/" + std::string(name)) == FileKind::kFile;
    std::optional<std::string> first;
    for (const LoadedPart* p : parts) {
      const std::string path = p->dir + "/" + std::string(name);
      if ((fs->KindOf(path) == FileKind::kFile) != expected) {
        return Status::InvalidInput(fmt::format(
            "{} is {} while part {} {} one: rerun part {}", path, expected ? "missing" : "there",
            parts.front()->record.part, expected ? "has" : "has no", p->record.part));
      }
      if (!expected) continue;
      SPK_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path));
      if (!first) {
        first = ContentHash(text);
      } else if (*first != ContentHash(text)) {
        return Status::InvalidInput(
            fmt::format("{} differs from part 1's: rerun part {}", path, p->record.part));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<MergeSummary> MergeParts(const RunContext& run, const MergeOptions& options) {
  FileSystem* fs = run.fs;
  if (options.parts.empty()) return Status::Usage("merge needs the folders of the parts");
  std::vector<LoadedPart> loaded;
  for (const std::string& dir : options.parts) {
    SPK_ASSIGN_OR_RETURN(LoadedPart part, LoadPart(fs, dir));
    loaded.push_back(std::move(part));
  }
  SPK_ASSIGN_OR_RETURN(std::vector<const LoadedPart*> parts, OrderParts(loaded));
  MergeSummary summary;
  summary.destination = options.destination;
  summary.parts = static_cast<int>(parts.size());
  SPK_ASSIGN_OR_RETURN(auto where, LocateShards(fs, parts, &summary.shard_bytes));
  SPK_RETURN_IF_ERROR(CheckSharedFiles(fs, parts));

  CheckpointWriter writer(fs, CheckpointWriterOptions::For(options.destination, options.force, 0,
                                                           options.durability, false));
  const std::string& first = parts.front()->dir;
  for (const std::string& name : parts.front()->record.all_shards) {
    writer.AddCopy(where.at(name)->dir + "/" + name, name);
  }
  writer.AddCopy(first + "/config.json", "config.json");
  const std::string index = first + "/" + std::string(kShardIndexFileName);
  if (fs->KindOf(index) == FileKind::kFile) {
    writer.AddCopy(index, std::string(kShardIndexFileName));
  }
  std::vector<std::string> warnings;
  SPK_ASSIGN_OR_RETURN(summary.copied_files, CopyOtherFiles(fs, first, &writer, &warnings));
  SPK_RETURN_IF_ERROR(writer.Finish());
  summary.shards = where.size();
  return summary;
}

nlohmann::ordered_json MergeSummaryToJson(const MergeSummary& s) {
  return {{"destination", s.destination},
          {"parts", s.parts},
          {"shards", s.shards},
          {"shard_bytes", s.shard_bytes},
          {"copied_files", s.copied_files}};
}

}  // namespace spk
