// `sparkulator merge DST PART... [--force] [--no-fsync] [--json]`: the parts of a quantize job
// split across machines (quantize --part I/N) made into one checkpoint, byte for byte the one a
// single machine writes (quantize/merge.h says what is checked first).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "command_flags.h"
#include "commands.h"

namespace spk::cli {
namespace {

// In the order of the CLI's --help and of the Python merge()'s parameters.
constexpr OptionRow<MergeFlags> kMergeRows[] = {
    {"DST", "dst", ParamType::kPath, "", "Output folder (must not exist unless --force)",
     &MergeFlags::destination},
    {"PART", "parts", ParamType::kPathList, "", "The folders the parts wrote, in any order",
     &MergeFlags::parts},
    {"--force", "force", ParamType::kBool, "False", "Replace DST if it exists", &MergeFlags::force},
    {"--no-fsync", "fsync", ParamType::kBool, "True",
     "Do not wait for the output to reach the disk (as cp does); the rename stays atomic "
     "(fsync=False in Python)",
     &MergeFlags::fsync},
};

}  // namespace

std::span<const OptionRow<MergeFlags>> MergeOptionRows() { return kMergeRows; }

void AddMergeCommand(CLI::App& app, CommandBody* run) {
  auto flags = std::make_shared<MergeFlags>();
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "merge",
      "Make the parts of a quantize job split across machines (quantize SRC PART --part I/N, "
      "for I = 1..N) into one checkpoint, byte for byte the single-machine output. Checks first "
      "that the parts are one job's, each part given once, every shard's content hash as its "
      "part recorded; writes DST atomically; reads the parts only (docs/distributed.md).");
  AddOptionRows(sub, MergeOptionRows(), flags.get());
  sub->add_flag("--json", *json, "Print a summary as JSON");
  sub->callback([=] {
    *run = [=] {
      MergeOptions options = *flags;
      options.durability = flags->fsync ? Durability::kSynced : Durability::kPageCache;
      auto summary = MergeParts(RunContext{}, options);
      if (!summary.ok()) return ReportError(summary.status());
      if (*json) {
        std::printf("%s\n", MergeSummaryToJson(*summary).dump(2).c_str());
      } else {
        std::printf("%s: %d part(s) merged, %zu shard(s), %llu bytes of shards\n",
                    summary->destination.c_str(), summary->parts, summary->shards,
                    static_cast<unsigned long long>(summary->shard_bytes));
      }
      return 0;
    };
  });
}

}  // namespace spk::cli
