// `sparkulator dequantize SRC DST [--force] [--threads N] [--no-fsync] [--json]`: a
// compressed-tensors checkpoint of any format sparkulator writes back to a dense one, in the dtype
// compressed-tensors decompresses each format to, config.json without quantization_config.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "dequantize/dequantize.h"

namespace spk::cli {

void AddDequantizeCommand(CLI::App& app, CommandBody* run) {
  auto options = std::make_shared<DequantizeOptions>();
  auto json = std::make_shared<bool>(false);
  auto no_fsync = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "dequantize",
      "Write a dense copy of a compressed-tensors checkpoint of any --scheme sparkulator writes, "
      "bit for bit as compressed-tensors decompresses it (in the dtype of the scales for int and "
      "FP8 formats, BF16 for NVFP4, MXFP4 and MXFP8); or of an FP8-block, GPTQ/AWQ or ModelOpt "
      "NVFP4/FP8 source, decoded as quantize reads it (docs/formats.md).");
  sub->add_option("SRC", options->source, "The quantized checkpoint")->required();
  sub->add_option("DST", options->destination, "Output folder (must not exist)")->required();
  sub->add_flag("--force", options->force, "Replace DST if it exists");
  auto threads = std::make_shared<int>(0);
  AddWriteFlags(sub, threads.get(), no_fsync.get());
  sub->add_flag("--json", *json, "Print a summary as JSON");
  sub->callback([=] {
    options->durability = *no_fsync ? Durability::kPageCache : Durability::kSynced;
    *run = [=] {
      auto summary = DequantizeCheckpoint(RunContext{.threads = *threads}, *options);
      if (!summary.ok()) return ReportError(summary.status());
      if (*json) {
        std::printf("%s\n", DequantizeSummaryToJson(*summary).dump(2).c_str());
      } else {
        std::printf("%s -> %s: %zu module(s) dequantized, %zu tensor(s) copied, %zu shard(s)\n",
                    summary->source_dir.c_str(), summary->destination.c_str(),
                    summary->dequantized_modules, summary->copied_tensors, summary->shards);
        for (const std::string& w : summary->warnings) std::printf("warning: %s\n", w.c_str());
      }
      return 0;
    };
  });
}

}  // namespace spk::cli
