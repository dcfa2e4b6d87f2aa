#include "model/moe.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "base/strings.h"
#include "quant/stored_names.h"

namespace spk {
namespace {

// model_free_ptq's params_to_split (llmcompressor 0.14.0.1, entrypoints/model_free/converter.py:
// 212-219): a 3-D tensor whose name contains the key becomes the parts, in order, per expert.
// `hidden_axis` is where the model's hidden size sits in the [E, rows, cols] layout the split
// assumes (each expert a Linear weight [out, in]): gate/up read the hidden state (cols), down
// writes it (rows).
struct FusedExpertKey {
  std::string_view key;
  std::vector<std::string_view> parts;
  size_t hidden_axis;
};
const std::array<FusedExpertKey, 2>& FusedExpertKeys() {
  static const std::array<FusedExpertKey, 2> kKeys = {{
      {"gate_up_proj", {"gate_proj", "up_proj"}, 2},
      {"down_proj", {"down_proj"}, 1},
  }};
  return kKeys;
}

// The per-expert projection leaves vLLM's FusedMoE weight loaders take (expert_params_mapping:
// ckpt_gate_proj_name / ckpt_up_proj_name / ckpt_down_proj_name, and Mixtral's w1/w3/w2), and
// gate_up_proj, the name the plan gives fused gate/up shards.
constexpr std::array<std::string_view, 7> kExpertLeaves = {
    "gate_proj", "up_proj", "gate_up_proj", "down_proj", "w1", "w3", "w2"};

// A router or gate row: `leaf` in a model whose architecture contains `architecture` (empty: any
// other), and how vLLM 0.32 builds it (vllm/model_executor/models/<file>).
struct RouterRow {
  std::string_view leaf;
  std::string_view architecture;
  bool with_quant_config;
  std::string_view vllm;
};
constexpr std::array<RouterRow, 5> kRouters = {{
    {"shared_expert_gate", "", false,
     "ReplicatedLinear(hidden, 1, quant_config=None) (qwen2_moe.py, qwen3_moe.py)"},
    {"gate", "Qwen3Moe", true,
     "GateLinear(hidden, num_experts, quant_config=quant_config) (qwen3_moe.py): kept dense and "
     "listed in ignore, as llm-compressor's MoE examples do"},
    {"gate", "Lfm2Moe", true,
     "GateLinear(..., quant_config=quant_config) (lfm2_moe.py): kept dense and listed in ignore"},
    {"gate", "", false,
     "GateLinear(hidden, num_experts) with no quant_config (laguna.py, mixtral.py, "
     "deepseek_v2.py, qwen2_moe.py and most MoE models)"},
    {"router", "", false,
     "GateLinear(hidden, num_experts, bias=True), no quant_config (gpt_oss.py)"},
}};

bool HasArchitecture(const ModelConfig& config, std::string_view needle) {
  return std::any_of(config.architectures.begin(), config.architectures.end(),
                     [&](const std::string& a) { return a.find(needle) != std::string::npos; });
}

}  // namespace

Result<std::vector<ExpertSlice>> SplitFusedExperts(std::string_view file, std::string_view name,
                                                   DType dtype, const std::vector<int64_t>& shape,
                                                   std::optional<int64_t> hidden_size) {
  std::vector<const FusedExpertKey*> keys;
  for (const FusedExpertKey& k : FusedExpertKeys()) {
    if (name.find(k.key) != std::string_view::npos) keys.push_back(&k);
  }
  if (keys.size() >= 2) {
    return Status::InvalidInput(fmt::format(
        "{}: tensor '{}' names both gate_up_proj and down_proj; model_free_ptq refuses it too "
        "(\"Found multiple keys matching\"): rename the tensor",
        file, name));
  }
  if (keys.empty() || shape.size() != 3) return std::vector<ExpertSlice>{};
  const FusedExpertKey& key = *keys.front();
  const int64_t parts = static_cast<int64_t>(key.parts.size());
  const size_t other_axis = 3 - key.hidden_axis;
  if (hidden_size && shape[key.hidden_axis] != *hidden_size && shape[other_axis] == *hidden_size) {
    return Status::InvalidInput(fmt::format(
        "{}: fused expert tensor '{}' [{}, {}, {}] holds the hidden size ({}) on axis {}, where a "
        "Linear weight [out, in] has it on axis {}: its experts are stored [in, out] "
        "(transformers' batched-matmul layout of Llama4 and gpt-oss). model_free_ptq would split "
        "it as [out, in] and write experts no model loads ({}), so sparkulator refuses it; "
        "quantize a checkpoint whose experts are per-expert gate_proj/up_proj/down_proj weights",
        file, name, shape[0], shape[1], shape[2], *hidden_size, other_axis, key.hidden_axis,
        key.parts.size() > 1 ? "gate and up cut out of the hidden axis" : "each one transposed"));
  }
  if (shape[1] % parts != 0) {
    return Status::InvalidInput(fmt::format(
        "{}: fused expert tensor '{}' [{}, {}, {}]: {} needs a second dimension divisible by {} "
        "(gate rows then up rows)",
        file, name, shape[0], shape[1], shape[2], key.key, parts));
  }
  if (DTypeBits(dtype) % 8 != 0) {
    return Status::InvalidInput(fmt::format(
        "{}: fused expert tensor '{}' is {}, a sub-byte type whose experts cannot be split at byte "
        "boundaries; start from the BF16/F16/F32 checkpoint",
        file, name, DTypeName(dtype)));
  }
  const int64_t rows = shape[1] / parts, cols = shape[2];
  const uint64_t part_bytes = static_cast<uint64_t>(rows) * cols * (DTypeBits(dtype) / 8);
  std::vector<ExpertSlice> out;
  for (int64_t e = 0; e < shape[0]; ++e) {
    for (int64_t p = 0; p < parts; ++p) {
      ExpertSlice s;
      s.name = ReplaceAll(name, key.key, fmt::format("{}.{}", e, key.parts[p]));
      if (!s.name.ends_with(kWeightSuffix)) s.name += kWeightSuffix;
      s.expert = e;
      s.shape = {rows, cols};
      s.byte_offset = static_cast<uint64_t>(e * parts + p) * part_bytes;
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::optional<std::string> RoutedExpertsModule(std::string_view module) {
  if (std::find(kExpertLeaves.begin(), kExpertLeaves.end(), Leaf(module)) == kExpertLeaves.end()) {
    return std::nullopt;
  }
  std::string_view rest = module.substr(0, module.size() - Leaf(module).size() - 1);
  size_t dot = rest.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view index = rest.substr(dot + 1);
  int64_t e = 0;
  auto [ptr, ec] = std::from_chars(index.data(), index.data() + index.size(), e);
  if (ec != std::errc() || ptr != index.data() + index.size()) return std::nullopt;
  std::string_view experts = rest.substr(0, dot);
  if (Leaf(experts) != "experts") return std::nullopt;
  return std::string(experts);
}

std::optional<RouterRule> RouterKeepRule(const ModelConfig& config, std::string_view module) {
  std::string_view leaf = Leaf(module);
  for (const RouterRow& row : kRouters) {
    if (row.leaf != leaf) continue;
    if (!row.architecture.empty() && !HasArchitecture(config, row.architecture)) continue;
    return RouterRule{fmt::format("MoE router: vLLM builds it as {}", row.vllm),
                      !row.with_quant_config};
  }
  return std::nullopt;
}

}  // namespace spk
