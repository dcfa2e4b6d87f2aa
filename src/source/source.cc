#include "source/source.h"

#include <fmt/format.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "model/moe.h"

namespace spk {
namespace {

std::string HubCacheDir() {
  if (const char* hub = std::getenv("HF_HUB_CACHE"); hub && *hub) return hub;
  if (const char* home = std::getenv("HF_HOME"); home && *home) return std::string(home) + "/hub";
  const char* user_home = std::getenv("HOME");
  return std::string(user_home ? user_home : "") + "/.cache/huggingface/hub";
}

bool LooksLikeRepoId(const std::string& spec) {
  size_t slash = spec.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < spec.size() &&
         spec.find('/', slash + 1) == std::string::npos && spec[0] != '.';
}

Result<std::string> ResolveInHubCache(FileSystem* fs, const std::string& repo_id) {
  std::string cache = HubCacheDir();
  std::string repo_dir = cache + "/models--" + repo_id.substr(0, repo_id.find('/')) + "--" +
                         repo_id.substr(repo_id.find('/') + 1);
  if (!fs->IsDirectory(repo_dir)) {
    return Status::NotFound(fmt::format(
        "'{}' is neither a folder nor a model in the local Hugging Face cache ({} does not exist); "
        "download it first (sparkulator never uses the network)",
        repo_id, repo_dir));
  }
  auto ref = fs->ReadFile(repo_dir + "/refs/main");
  if (ref.ok()) {
    std::string commit = *ref;
    while (!commit.empty() && (commit.back() == '\n' || commit.back() == ' ')) commit.pop_back();
    std::string snapshot = repo_dir + "/snapshots/" + commit;
    if (fs->IsDirectory(snapshot)) return snapshot;
  }
  auto snapshots = fs->ListDirectory(repo_dir + "/snapshots");
  if (!snapshots.ok() || snapshots->empty()) {
    return Status::NotFound(fmt::format("{}: no snapshot in the Hugging Face cache", repo_dir));
  }
  if (snapshots->size() > 1) {
    return Status::NotFound(fmt::format(
        "{}: several snapshots and no refs/main; pass the snapshot folder itself", repo_dir));
  }
  return repo_dir + "/snapshots/" + snapshots->front();
}

// Mistral's own checkpoint format (params.json beside consolidated*.safetensors), which vLLM reads
// in config.json's place whenever both are there (transformers_utils/config.py, config_format
// auto) and sparkulator not at all: a folder with params.json and no config.json is refused by
// name, so that the user is not told only that config.json is missing. Mistral Large 4 is read by
// vLLM from this format alone (configs/mistral.py adapt_config_dict sets model_type
// mistral_large_4), and with it the DSpark draft its params.json's `mtp.dspark` block describes
// (vLLM 0.34, MistralLarge4DSparkModel): vLLM builds that draft from the target's `mtp_dspark.*`
// tensors with quantization_config None (get_mistral_large_4_dspark_config; dspark/config.py
// gives it no quantization: "Mistral Large 4 DSpark drafts ship in BF16"), so those must stay BF16
// in any copy of the target (vllm_build.h EmbeddedDraftKeepReason keeps them dense where a
// Hugging Face folder holds them).
constexpr std::string_view kMistralParamsFile = "params.json";

Status RefuseMistralFormat(FileSystem* fs, const std::string& dir) {
  const std::string params = dir + "/" + std::string(kMistralParamsFile);
  if (fs->FileExists(dir + "/config.json") || !fs->FileExists(params)) return Status::Ok();
  bool dspark = false;
  if (auto text = fs->ReadFile(params); text.ok()) {
    const auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      auto mtp = j.find("mtp");
      dspark = mtp != j.end() && mtp->is_object() && mtp->contains("dspark");
    }
  }
  if (dspark) {
    return Status::InvalidInput(fmt::format(
        "{}: a Mistral-format checkpoint (params.json and consolidated safetensors) with a DSpark "
        "draft (mtp.dspark): Mistral Large 4, which vLLM reads from this format only, and whose "
        "draft vLLM 0.34 builds as MistralLarge4DSparkModel from the mtp_dspark.* tensors with "
        "quantization_config None, so they must stay BF16 whatever the target's quantization. "
        "sparkulator reads Hugging Face folders (config.json and model*.safetensors) only and "
        "cannot quantize or check it: serve it as Mistral ships it (vllm serve {} "
        "--speculative-config '{{\"method\": \"dspark\"}}')",
        params, dir));
  }
  return Status::InvalidInput(fmt::format(
      "{}: a Mistral-format checkpoint (params.json and consolidated safetensors, no config.json), "
      "which sparkulator does not read: pass the model's Hugging Face-format folder (config.json "
      "and model*.safetensors; Mistral's repos often ship both) instead",
      params));
}

// The language model's hidden size: config.json's hidden_size, or its text_config's where the
// model is multimodal (Llama4); nullopt when neither gives one.
std::optional<int64_t> TextHiddenSize(const ModelConfig& config) {
  if (config.hidden_size) return config.hidden_size;
  auto text = config.json.find("text_config");
  if (text == config.json.end() || !text->is_object()) return std::nullopt;
  auto hidden = text->find("hidden_size");
  if (hidden == text->end() || !hidden->is_number_integer()) return std::nullopt;
  return hidden->get<int64_t>();
}

}  // namespace

Result<std::string> ResolveModelPath(FileSystem* fs, const std::string& spec) {
  if (fs->IsDirectory(spec)) {
    SPK_RETURN_IF_ERROR(RefuseMistralFormat(fs, spec));
    return spec;
  }
  if (LooksLikeRepoId(spec) && !fs->FileExists(spec)) {
    SPK_ASSIGN_OR_RETURN(std::string dir, ResolveInHubCache(fs, spec));
    SPK_RETURN_IF_ERROR(RefuseMistralFormat(fs, dir));
    return dir;
  }
  if (fs->FileExists(spec)) {
    return Status::InvalidInput(fmt::format(
        "{}: is a file; pass the model folder that holds config.json and the safetensors", spec));
  }
  return Status::NotFound(fmt::format("{}: no such folder", spec));
}

Result<SourceCheckpoint> OpenSourceCheckpoint(FileSystem* fs, const std::string& spec) {
  SPK_ASSIGN_OR_RETURN(std::string dir, ResolveModelPath(fs, spec));
  std::string config_path = dir + "/config.json";
  if (!fs->FileExists(config_path)) {
    return Status::NotFound(fmt::format(
        "{}: missing; a Hugging Face model folder needs its config.json (vLLM reads it too)",
        config_path));
  }
  SPK_ASSIGN_OR_RETURN(std::string config_text, fs->ReadFile(config_path));
  SPK_ASSIGN_OR_RETURN(ModelConfig config, ParseModelConfig(config_path, config_text));
  SPK_ASSIGN_OR_RETURN(SafetensorsCheckpoint files, SafetensorsCheckpoint::Open(fs, dir));
  SourceCheckpoint source{dir, std::move(files), std::move(config), {}, {}, {}, {}, {}, {}, {}, {}};
  for (std::string_view side : kQuantizationSideFiles) {
    if (source.config.has_quantization_config) break;
    const std::string path = dir + "/" + std::string(side);
    if (!fs->FileExists(path)) continue;
    SPK_ASSIGN_OR_RETURN(source.side_config, fs->ReadFile(path));
    source.side_config_file = std::string(side);
    break;
  }
  for (size_t s = 0; s < source.files.shard_files().size(); ++s) {
    for (const TensorEntry& t : source.files.shard(s).header().tensors) {
      source.tensors.push_back({t.name, t.dtype, t.shape, /*split_from=*/""});
      source.tensor_shard.push_back(s);
      source.entries.push_back(t);
    }
  }
  return source;
}

Status ExpandFusedExperts(SourceCheckpoint* src) {
  // A quantized fused tensor (ModelOpt's export of Llama4's and gpt-oss's BMM experts: the packed
  // `X` [E, in / 2, out] beside `X_weight_scale`) is not split: its experts are not decoded.
  std::set<std::string_view> names;
  for (const TensorMeta& t : src->tensors) names.insert(t.name);
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    const TensorMeta& t = src->tensors[i];
    if (t.shape.size() != 3 || !names.contains(t.name + "_weight_scale")) continue;
    return Status::InvalidInput(fmt::format(
        "{}/{}: tensor '{}': a quantized fused 3-D expert tensor ({} [{}] with its "
        "{}_weight_scale, as ModelOpt exports Llama4's and gpt-oss's experts): its experts are not "
        "decoded; quantize the original BF16/F16/F32 checkpoint",
        src->dir, src->files.shard_files()[src->tensor_shard[i]], t.name, DTypeName(t.dtype),
        fmt::join(t.shape, ", "), t.name));
  }
  const std::optional<int64_t> hidden_size = TextHiddenSize(src->config);
  std::vector<TensorMeta> tensors;
  std::vector<size_t> shards;
  std::vector<TensorEntry> entries;
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    const TensorMeta& t = src->tensors[i];
    const std::string& file = src->files.shard_files()[src->tensor_shard[i]];
    SPK_ASSIGN_OR_RETURN(auto slices, SplitFusedExperts(src->dir + "/" + file, t.name, t.dtype,
                                                        t.shape, hidden_size));
    if (slices.empty()) {
      tensors.push_back(t);
      shards.push_back(src->tensor_shard[i]);
      entries.push_back(src->entries[i]);
      continue;
    }
    for (ExpertSlice& s : slices) {
      TensorEntry e{s.name, t.dtype, s.shape, src->entries[i].begin + s.byte_offset, 0};
      e.end = e.begin + TensorMeta{s.name, t.dtype, s.shape, /*split_from=*/""}.nbytes();
      tensors.push_back({std::move(s.name), t.dtype, std::move(s.shape), t.name});
      shards.push_back(src->tensor_shard[i]);
      entries.push_back(std::move(e));
    }
  }
  src->tensors = std::move(tensors);
  src->tensor_shard = std::move(shards);
  src->entries = std::move(entries);
  return Status::Ok();
}

std::optional<size_t> FindSourceTensor(const SourceCheckpoint& src, std::string_view name) {
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    if (src.tensors[i].name == name) return i;
  }
  return std::nullopt;
}

}  // namespace spk
