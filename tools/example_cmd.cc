// `sparkulator example DIR`: writes a small checkpoint shaped like a draft family, for trying the
// tool.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "example_flags.h"

namespace spk::cli {
namespace {

// In the order of the CLI's --help and of the Python example()'s parameters after `dir`.
constexpr OptionRow<ExampleOptions> kExampleRows[] = {
    {"--family", "family", ParamType::kStr, "\"dflash\"",
     "dflash, eagle3 (vLLM's Eagle3Qwen3ForCausalLM layout), eagle3-speculators (the speculators "
     "config format) or llm",
     &ExampleOptions::family},
    {"--shards", "shards", ParamType::kInt, "1", "Number of safetensors shards",
     &ExampleOptions::shards},
    {"--hidden", "hidden", ParamType::kInt, "256", "Hidden size (multiple of 64)",
     &ExampleOptions::hidden},
    {"--intermediate", "intermediate", ParamType::kInt, "768", "MLP size",
     &ExampleOptions::intermediate},
    {"--layers", "layers", ParamType::kInt, "2", "Decoder layers", &ExampleOptions::layers},
    {"--kv-heads", "kv_heads", ParamType::kInt, "0",
     "Key/value heads of 64 dims (0: half the heads)", &ExampleOptions::kv_heads},
    {"--fc-inputs", "fc_inputs", ParamType::kInt, "0",
     "DFlash: target layers concatenated into fc (0: 3)", &ExampleOptions::fc_inputs},
    {"--target-layers", "target_layers", ParamType::kInt, "0",
     "Layers of the target the draft is for (DFlash num_target_layers; EAGLE-3: the aux layer ids "
     "are derived from it). 0: 8 (DFlash: at least 2 * fc inputs + 2)",
     &ExampleOptions::target_layers},
    {"--vocab", "vocab", ParamType::kInt, "1024", "Vocabulary size", &ExampleOptions::vocab},
    {"--dtype", "dtype", ParamType::kStr, "\"BF16\"", "BF16, F16 or F32", &ExampleOptions::dtype},
    {"--seed", "seed", ParamType::kInt, "1", "Random seed", &ExampleOptions::seed},
    {"--force", "force", ParamType::kBool, "False", "Replace DIR if it exists",
     &ExampleOptions::force},
};

}  // namespace

std::span<const OptionRow<ExampleOptions>> ExampleOptionRows() { return kExampleRows; }

void AddExampleCommand(CLI::App& app, CommandBody* run) {
  auto options = std::make_shared<ExampleOptions>();
  CLI::App* sub = app.add_subcommand(
      "example",
      "Write a small checkpoint shaped like a DFlash draft, an EAGLE-3 head or a Qwen3-style LLM "
      "(random weights with realistic scale and outlier columns), to try quantize and inspect on.");
  sub->add_option("DIR", options->dir, "Output folder (must not exist unless --force)")->required();
  AddOptionRows(sub, ExampleOptionRows(), options.get());
  sub->callback([=] {
    *run = [=] {
      Status s = WriteExampleCheckpoint(*options, FileSystem::Default());
      if (!s.ok()) return ReportError(s);
      std::printf("wrote a %s example checkpoint to %s\n", options->family.c_str(),
                  options->dir.c_str());
      return 0;
    };
  });
}

}  // namespace spk::cli
