// `sparkulator dequantize SRC DST [--force] [--threads N] [--no-fsync] [--json]`: a
// compressed-tensors checkpoint of any format sparkulator writes back to a dense one, in the dtype
// compressed-tensors decompresses each format to, config.json without quantization_config.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "command_flags.h"
#include "commands.h"

namespace spk::cli {
namespace {

// In the order of the CLI's --help; the Python dequantize() picks them by name, in its own order,
// with the write options' rows (--threads, --no-fsync).
constexpr OptionRow<DequantizeFlags> kDequantizeRows[] = {
    {"SRC", "src", ParamType::kPath, "", "The quantized checkpoint", &DequantizeFlags::source},
    {"DST", "dst", ParamType::kPath, "", "Output folder (must not exist)",
     &DequantizeFlags::destination},
    {"--force", "force", ParamType::kBool, "False", "Replace DST if it exists",
     &DequantizeFlags::force},
};

}  // namespace

std::span<const OptionRow<DequantizeFlags>> DequantizeOptionRows() { return kDequantizeRows; }

void AddDequantizeCommand(CLI::App& app, CommandBody* run) {
  auto flags = std::make_shared<DequantizeFlags>();
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "dequantize",
      "Write a dense copy of a compressed-tensors checkpoint of any --scheme sparkulator writes, "
      "bit for bit as compressed-tensors decompresses it (in the dtype of the scales for int and "
      "FP8 formats, BF16 for NVFP4, MXFP4 and MXFP8); or of an FP8-block, GPTQ/AWQ or ModelOpt "
      "NVFP4/FP8 source, decoded as quantize reads it (docs/formats.md).");
  AddOptionRows(sub, DequantizeOptionRows(), flags.get());
  AddOptionRows(sub, WriteOptionRows(), flags.get());
  sub->add_flag("--json", *json, "Print a summary as JSON");
  sub->callback([=] {
    *run = [=] {
      DequantizeOptions options = *flags;
      options.durability = flags->WriteDurability();
      auto summary = DequantizeCheckpoint(RunContext{.threads = flags->threads}, options);
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
