// `sparkulator merge DST PART... [--force] [--no-fsync] [--json]`: the parts of a quantize job
// split across machines (quantize --part I/N) made into one checkpoint, byte for byte the one a
// single machine writes (quantize/merge.h says what is checked first).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "quantize/merge.h"

namespace spk::cli {

void AddMergeCommand(CLI::App& app, CommandBody* run) {
  auto options = std::make_shared<MergeOptions>();
  auto json = std::make_shared<bool>(false);
  auto no_fsync = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "merge",
      "Make the parts of a quantize job split across machines (quantize SRC PART --part I/N, "
      "for I = 1..N) into one checkpoint, byte for byte the single-machine output. Checks first "
      "that the parts are one job's, each part given once, every shard's content hash as its "
      "part recorded; writes DST atomically; reads the parts only (docs/distributed.md).");
  sub->add_option("DST", options->destination, "Output folder (must not exist unless --force)")
      ->required();
  sub->add_option("PART", options->parts, "The folders the parts wrote, in any order")->required();
  sub->add_flag("--force", options->force, "Replace DST if it exists");
  sub->add_flag("--no-fsync", *no_fsync,
                "Do not wait for the output to reach the disk (as cp does); the rename stays "
                "atomic");
  sub->add_flag("--json", *json, "Print a summary as JSON");
  sub->callback([=] {
    options->durability = *no_fsync ? Durability::kPageCache : Durability::kSynced;
    *run = [=] {
      auto summary = MergeParts(RunContext{}, *options);
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
