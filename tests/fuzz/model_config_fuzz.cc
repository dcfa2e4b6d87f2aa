// libFuzzer target: every command reads a user's config.json, so its parser, the
// quantization_config reader, the draft-family detection and the vLLM naming built from it must
// never crash, hang or read out of bounds, whatever the JSON holds (wrong types, huge or negative
// layer counts, NaN-like numbers). A config that parses gives a family, a naming and a
// speculative-token count; one that does not gives an error naming the file.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_config.h"
#include "model/quant_config.h"
#include "vllm/family.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = spk::ParseModelConfig("config.json", text);
  if (!config.ok()) {
    // The error names the file it is about.
    if (config.status().message().find("config.json") == std::string::npos) std::abort();
    return 0;
  }
  const std::vector<std::string> tensors = {"layers.0.self_attn.q_proj.weight",
                                            "layers.0.mlp.down_proj.weight", "fc.weight"};
  for (spk::Preset preset : {spk::Preset::kAuto, spk::Preset::kNone}) {
    spk::FamilyDetection family = spk::DetectFamily(*config, tensors, preset);
    spk::VllmNaming naming = spk::NamingFor(family, *config, tensors, std::nullopt);
    (void)spk::ToVllmModuleName(naming, "layers.0.self_attn.q_proj");
    std::string why;
    (void)spk::NumSpeculativeTokens(family.family, *config, &why);
  }
  if (config->has_quantization_config) {
    (void)spk::SchemeFromConfig("config.json", *config);
    if (config->json.contains("quantization_config")) {
      (void)spk::ParseQuantizationConfig("config.json", config->json["quantization_config"]);
    }
  }
  return 0;
}
