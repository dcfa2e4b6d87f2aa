// `sparkulator example DIR`: writes a small checkpoint shaped like a draft family, for trying the
// tool.
#include <cstdio>
#include <memory>

#include "checkpoint/example.h"
#include "commands.h"

namespace spk::cli {

void AddExampleCommand(CLI::App& app, CommandBody* run) {
  auto options = std::make_shared<ExampleOptions>();
  CLI::App* sub = app.add_subcommand(
      "example",
      "Write a small checkpoint shaped like a DFlash draft, an EAGLE-3 head or a Qwen3-style LLM "
      "(random weights with realistic scale and outlier columns), to try quantize and inspect on.");
  sub->add_option("DIR", options->dir, "Output folder (must not exist unless --force)")->required();
  sub->add_option("--family", options->family,
                  "dflash, eagle3 (vLLM's Eagle3Qwen3ForCausalLM layout), eagle3-speculators (the "
                  "speculators config format) or llm")
      ->capture_default_str();
  sub->add_option("--shards", options->shards, "Number of safetensors shards")
      ->capture_default_str();
  sub->add_option("--hidden", options->hidden, "Hidden size (multiple of 64)")
      ->capture_default_str();
  sub->add_option("--intermediate", options->intermediate, "MLP size")->capture_default_str();
  sub->add_option("--layers", options->layers, "Decoder layers")->capture_default_str();
  sub->add_option("--kv-heads", options->kv_heads, "Key/value heads of 64 dims (0: half the heads)")
      ->capture_default_str();
  sub->add_option("--fc-inputs", options->fc_inputs,
                  "DFlash: target layers concatenated into fc (0: 3)")
      ->capture_default_str();
  sub->add_option("--target-layers", options->target_layers,
                  "Layers of the target the draft is for (DFlash num_target_layers; EAGLE-3: "
                  "the aux layer ids are derived from it). 0: 8 (DFlash: at least 2 * fc inputs "
                  "+ 2)")
      ->capture_default_str();
  sub->add_option("--vocab", options->vocab, "Vocabulary size")->capture_default_str();
  sub->add_option("--dtype", options->dtype, "BF16, F16 or F32")->capture_default_str();
  sub->add_option("--seed", options->seed, "Random seed")->capture_default_str();
  sub->add_flag("--force", options->force, "Replace DIR if it exists");
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
