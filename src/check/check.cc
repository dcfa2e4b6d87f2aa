#include "check/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "checkpoint/family.h"
#include "checkpoint/model_config.h"
#include "checkpoint/module_pattern.h"
#include "checkpoint/plan.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/source.h"
#include "io/fs_util.h"
#include "quant/scheme.h"
#include "quantize/report.h"
#include "safetensors/index.h"
#include "safetensors/reader.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kPacked = ".weight_packed";
constexpr std::string_view kScale = ".weight_scale";
constexpr std::string_view kShape = ".weight_shape";
constexpr std::string_view kZeroPoint = ".weight_zero_point";
constexpr std::string_view kWeight = ".weight";

// Formats vLLM's compressed-tensors integration knows but this checker does not verify tensor by
// tensor (vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py).
const std::set<std::string>& FormatsNotChecked() {
  static const std::set<std::string> kFormats = {
      "naive-quantized",     "float-quantized",   "int-quantized", "nvfp4-pack-quantized",
      "marlin-24",           "sparse-24-bitmask", "dense",         "mixed-precision",
      "mxfp4-pack-quantized"};
  return kFormats;
}

struct Located {
  size_t shard;
  const TensorEntry* entry;
};

// The tensors that make up one module of the checkpoint.
struct ModuleTensors {
  std::optional<Located> weight, packed, scale, shape, zero_point;
};

struct LinearModule {
  std::string module;  // checkpoint name
  std::string vllm_name;
  std::string fused;
  bool packed = false;
  std::string scale_dtype;
};

class Checker {
 public:
  Checker(FileSystem* fs, const CheckOptions& options, std::string dir)
      : fs_(fs), options_(options), dir_(std::move(dir)) {
    report_.path = dir_;
  }

  Result<CheckReport> Run();

 private:
  void Add(Severity severity, std::string code, std::string module, std::string file,
           std::string message, std::string fix) {
    // One finding per (code, module, file): fused layers are reached once per shard.
    if (!reported_.insert(code + "\n" + module + "\n" + file).second) return;
    report_.findings.push_back({severity, std::move(code), std::move(module), std::move(file),
                                std::move(message), std::move(fix)});
  }

  void LoadFiles();
  void OpenShard(const std::string& file, bool listed);
  void CheckIndexAgainstShards();
  bool LoadConfig();
  void CheckQuantConfig();
  void CollectModules();
  void CheckModules();
  void CheckLinear(const std::string& module, const ModuleTensors& mt, const TensorMeta& meta);
  std::optional<std::pair<int64_t, int64_t>> CheckPackedTensors(const std::string& module,
                                                                const ModuleTensors& mt,
                                                                const WeightQuantArgs& args);
  void CheckScaleValues(const std::string& module, const Located& scale);
  void CheckFusedAgreement();
  void CheckIgnoreEntries();
  Status CheckTarget();

  const SafetensorsReader& Reader(const Located& l) const { return readers_[l.shard]; }
  std::string FileOf(const Located& l) const { return reader_files_[l.shard]; }
  const ConfigGroup* MatchingGroup(const std::string& vllm_name, const std::string& fused) const;

  FileSystem* fs_;
  CheckOptions options_;
  std::string dir_;
  CheckReport report_;
  std::set<std::string> reported_;

  std::optional<ShardIndex> index_;
  std::vector<SafetensorsReader> readers_;
  std::vector<std::string> reader_files_;  // parallel to readers_
  std::map<std::string, Located> tensors_;
  std::vector<std::pair<std::string, SafetensorsReader>> unlisted_;

  ModelConfig config_;
  FamilyDetection family_;
  VllmNaming naming_;
  std::optional<QuantizationConfigView> qc_;
  std::vector<ModulePattern> ignore_;
  std::vector<std::vector<std::optional<ModulePattern>>> targets_;  // per group; nullopt: "Linear"
  std::map<std::string, ModuleTensors> modules_;
  std::vector<LinearModule> linears_;
  std::set<std::string> vllm_module_names_;
};

bool HasSuffix(const std::string& name, std::string_view suffix) {
  return name.size() > suffix.size() && name.ends_with(suffix);
}

void Checker::LoadFiles() {
  auto listing = ListDirectory(dir_);
  std::vector<std::string> present;
  if (listing.ok()) {
    for (const std::string& name : *listing) {
      if (HasSuffix(name, ".safetensors") && FileExists(dir_ + "/" + name)) {
        present.push_back(name);
      }
    }
  }
  std::sort(present.begin(), present.end());
  std::string index_path = dir_ + "/" + std::string(kShardIndexFileName);
  if (FileExists(index_path)) {
    auto text = ReadWholeFile(index_path);
    auto parsed =
        text.ok() ? ParseShardIndex(index_path, *text) : Result<ShardIndex>(text.status());
    if (!parsed.ok()) {
      Add(Severity::kError, "index-invalid", "", std::string(kShardIndexFileName),
          parsed.status().message(),
          "rewrite the index: {\"metadata\": {\"total_size\": N}, \"weight_map\": {tensor: file}}");
    } else {
      index_ = std::move(parsed).value();
    }
  }
  if (!index_) {
    if (present.empty()) {
      Add(Severity::kError, "no-safetensors", "", "",
          "the folder holds no .safetensors file; vLLM has nothing to load",
          "save the weights as safetensors (model.safetensors or shards with an index)");
      return;
    }
    if (present.size() > 1) {
      Add(Severity::kWarning, "index-missing", "", "",
          fmt::format("{} .safetensors files but no {}: vLLM loads them all, transformers "
                      "loads none",
                      present.size(), kShardIndexFileName),
          "write model.safetensors.index.json");
    }
    for (const std::string& f : present) OpenShard(f, true);
    return;
  }
  std::map<std::string, size_t> listed;  // file -> tensors the index places there
  for (const auto& [tensor, file] : index_->weight_map) listed[file]++;
  for (const auto& [file, count] : listed) {
    if (std::find(present.begin(), present.end(), file) == present.end()) {
      Add(Severity::kError, "index-file-missing", "", file,
          fmt::format("the index places {} tensor(s) in {}, which does not exist; vLLM fails to "
                      "load the checkpoint",
                      count, file),
          "copy the missing shard into the folder, or rewrite the index");
    } else {
      OpenShard(file, true);
    }
  }
  for (const std::string& file : present) {
    if (!listed.count(file)) OpenShard(file, false);
  }
  CheckIndexAgainstShards();
}

void Checker::OpenShard(const std::string& file, bool listed) {
  auto reader = SafetensorsReader::Open(fs_, dir_ + "/" + file);
  if (!reader.ok()) {
    Add(Severity::kError, "safetensors-invalid", "", file, reader.status().message(),
        "rewrite the file with a conforming safetensors writer (FORMAT.md 1)");
    return;
  }
  const auto& metadata = reader->header().metadata;
  auto format = std::find_if(metadata.begin(), metadata.end(),
                             [](const auto& kv) { return kv.first == "format"; });
  // No __metadata__ at all is accepted by every loader; one without format "pt" is not
  // (transformers 4.x raises "does not contain the valid metadata").
  if (!metadata.empty() && (format == metadata.end() || format->second != "pt")) {
    Add(Severity::kWarning, "safetensors-metadata-format", "", file,
        "__metadata__ lacks \"format\": \"pt\"; transformers 4.x refuses to load the file",
        "write __metadata__ {\"format\": \"pt\"}");
  }
  if (!listed) {
    unlisted_.emplace_back(file, std::move(reader).value());
    return;
  }
  size_t shard = readers_.size();
  readers_.push_back(std::move(reader).value());
  reader_files_.push_back(file);
  report_.shards.push_back(file);
  for (const TensorEntry& t : readers_.back().header().tensors) {
    auto [it, inserted] = tensors_.emplace(t.name, Located{shard, &t});
    if (!inserted) {
      Add(Severity::kError, "duplicate-tensor", t.name, file,
          fmt::format("tensor is also in {}; which copy vLLM keeps depends on load order",
                      reader_files_[it->second.shard]),
          "keep one copy and fix the index");
    }
  }
}

void Checker::CheckIndexAgainstShards() {
  for (const auto& [file, reader] : unlisted_) {
    size_t hidden = 0;
    for (const TensorEntry& t : reader.header().tensors) hidden += !tensors_.count(t.name);
    Add(hidden > 0 ? Severity::kError : Severity::kWarning, "shard-not-in-index", "", file,
        fmt::format("{} is not named in {}: vLLM silently skips it{}", file, kShardIndexFileName,
                    hidden > 0 ? fmt::format(", and {} tensor(s) exist only there", hidden) : ""),
        hidden > 0 ? "add its tensors to the index's weight_map" : "delete the stray file");
  }
  for (const auto& [tensor, file] : index_->weight_map) {
    auto it = tensors_.find(tensor);
    bool file_open =
        std::find(reader_files_.begin(), reader_files_.end(), file) != reader_files_.end();
    if (it == tensors_.end() && file_open) {
      Add(Severity::kError, "index-tensor-missing", tensor, file,
          fmt::format("the index places the tensor in {}, which does not contain it", file),
          "rewrite the index from the shards' headers");
    } else if (it != tensors_.end() && reader_files_[it->second.shard] != file) {
      Add(Severity::kWarning, "index-wrong-shard", tensor, reader_files_[it->second.shard],
          fmt::format("the index places the tensor in {}", file),
          "rewrite the index from the shards' headers");
    }
  }
  for (const auto& [tensor, located] : tensors_) {
    if (!index_->weight_map.count(tensor)) {
      Add(Severity::kWarning, "tensor-not-in-index", tensor, reader_files_[located.shard],
          "not listed in the index's weight_map (vLLM loads it with its shard; other loaders "
          "may not)",
          "add it to the weight_map");
    }
  }
}

bool Checker::LoadConfig() {
  std::string path = dir_ + "/config.json";
  if (!FileExists(path)) {
    Add(Severity::kError, "config-missing", "", "config.json",
        "no config.json: vLLM cannot build the model", "copy config.json from the source model");
    return false;
  }
  auto text = ReadWholeFile(path);
  auto parsed = text.ok() ? ParseModelConfig(path, *text) : Result<ModelConfig>(text.status());
  if (!parsed.ok()) {
    Add(Severity::kError, "config-invalid", "", "config.json", parsed.status().message(),
        "fix config.json");
    return false;
  }
  config_ = std::move(parsed).value();
  return true;
}

void Checker::CheckQuantConfig() {
  report_.scheme = "dense";
  if (!config_.has_quantization_config) return;
  auto parsed = ParseQuantizationConfig("config.json", config_.json);
  if (!parsed.ok()) {
    Add(Severity::kError, "quant-config-invalid", "", "config.json", parsed.status().message(),
        "rewrite quantization_config in the form of FORMAT.md 2.2");
    return;
  }
  if (parsed->quant_method != "compressed-tensors") {
    Add(Severity::kWarning, "quant-method-not-checked", "", "config.json",
        fmt::format("quant_method '{}': only compressed-tensors checkpoints are checked module "
                    "by module",
                    parsed->quant_method),
        "");
    return;
  }
  qc_ = std::move(parsed).value();
  auto check_format = [&](const std::string& format, const std::string& where) {
    if (format.empty() || format == "pack-quantized") return;
    if (FormatsNotChecked().count(format)) {
      Add(Severity::kWarning, "format-not-checked", "", "config.json",
          fmt::format("{} format '{}' is not verified tensor by tensor", where, format), "");
    } else {
      Add(Severity::kError, "unknown-format", "", "config.json",
          fmt::format("{} format '{}' is not a compressed-tensors format vLLM knows", where,
                      format),
          "use \"pack-quantized\" for integer weight-only schemes");
    }
  };
  check_format(qc_->format, "quantization_config");
  std::vector<std::string> labels;
  for (const ConfigGroup& g : qc_->groups) {
    check_format(g.format, "config_groups." + g.name);
    std::vector<std::optional<ModulePattern>> targets;
    for (const std::string& t : g.targets) {
      if (t == "Linear") {
        targets.emplace_back(std::nullopt);
        continue;
      }
      auto p = ModulePattern::Parse(t);
      if (!p.ok()) {
        Add(Severity::kError, "target-invalid-regex", t, "config.json", p.status().message(),
            "fix the pattern (Python re syntax)");
      } else {
        targets.emplace_back(std::move(p).value());
      }
    }
    targets_.push_back(std::move(targets));
    if (g.has_input_activations) {
      Add(Severity::kWarning, "not-weight-only", g.name, "config.json",
          "the group quantizes activations too; only weight-only schemes are checked in full", "");
    }
    if (!g.weights) continue;
    const WeightQuantArgs& w = *g.weights;
    labels.push_back(SchemeLabel(w));
    bool known_bits = FindSchemeFor(w) != nullptr;
    bool known_strategy = w.strategy == "group" || w.strategy == "channel";
    if (!known_bits || !known_strategy) {
      Add(Severity::kError, "unknown-scheme", g.name, "config.json",
          fmt::format("weights type '{}' num_bits {} strategy '{}' is not an integer W4A16/W8A16 "
                      "scheme vLLM's WNA16 path runs",
                      w.type, w.num_bits, w.strategy),
          "use type int, num_bits 4 or 8, strategy group or channel");
    }
    if (w.strategy == "group") {
      int64_t gs = w.group_size.value_or(0);
      if (!IsMarlinGroupSize(gs)) {
        Add(Severity::kError, "group-size-unsupported", g.name, "config.json",
            fmt::format("group_size {} has no vLLM (Marlin) kernel", gs),
            "requantize with group size 32, 64, 128 or channel-wise");
      }
    }
    if (!w.symmetric && w.num_bits == 8) {
      Add(Severity::kWarning, "asym-int8-no-marlin", g.name, "config.json",
          "asymmetric int8 never runs on Marlin; vLLM falls back to a slower kernel or fails",
          "use symmetric int8 (w8a16)");
    }
  }
  for (const std::string& key : qc_->unknown_weight_keys) {
    // A key set to a value changes what newer releases do and fails older ones: an error. Set to
    // null (llm-compressor 0.13+ writes "scale_dtype": null) it only fails the old releases.
    bool set = false;
    for (const auto& [name, group] : config_.json["quantization_config"]["config_groups"].items()) {
      if (group.contains("weights") && group["weights"].is_object() &&
          group["weights"].contains(key) && !group["weights"][key].is_null()) {
        set = true;
      }
    }
    Add(set ? Severity::kError : Severity::kWarning, "quant-args-key", key, "config.json",
        fmt::format("QuantizationArgs key '{}'{} is rejected by older compressed-tensors "
                    "releases (\"extra fields not permitted\"), so vLLM installs with them fail "
                    "to load the checkpoint",
                    key, set ? "" : " (null)"),
        fmt::format("remove '{}' from config_groups.*.weights (FORMAT.md 2.2)", key));
  }
  auto ignore = ParsePatterns(qc_->ignore, "ignore");
  if (!ignore.ok()) {
    Add(Severity::kError, "ignore-invalid-regex", "", "config.json", ignore.status().message(),
        "fix the pattern (Python re syntax)");
  } else {
    ignore_ = std::move(ignore).value();
  }
  report_.scheme =
      labels.empty() ? "compressed-tensors" : fmt::format("{}", fmt::join(labels, ", "));
}

void Checker::CollectModules() {
  for (const auto& [name, located] : tensors_) {
    for (auto [suffix, slot] : {std::pair{kPacked, &ModuleTensors::packed},
                                {kScale, &ModuleTensors::scale},
                                {kShape, &ModuleTensors::shape},
                                {kZeroPoint, &ModuleTensors::zero_point},
                                {kWeight, &ModuleTensors::weight}}) {
      if (HasSuffix(name, suffix)) {
        modules_[name.substr(0, name.size() - suffix.size())].*slot = located;
        break;
      }
    }
  }
}

const ConfigGroup* Checker::MatchingGroup(const std::string& vllm_name,
                                          const std::string& fused) const {
  if (!qc_) return nullptr;
  for (size_t g = 0; g < qc_->groups.size() && g < targets_.size(); ++g) {
    if (!qc_->groups[g].weights) continue;
    for (const auto& target : targets_[g]) {
      if (!target || target->Matches(vllm_name) || target->Matches(fused)) {
        return &qc_->groups[g];
      }
    }
  }
  return nullptr;
}

// The quantization args used for the shape rules of a packed module: its group's, else the first
// group's (a packed module no group targets is reported separately).
const WeightQuantArgs* ArgsFor(const ConfigGroup* group,
                               const std::optional<QuantizationConfigView>& qc) {
  if (group && group->weights) return &*group->weights;
  if (!qc) return nullptr;
  for (const ConfigGroup& g : qc->groups) {
    if (g.weights) return &*g.weights;
  }
  return nullptr;
}

void Checker::CheckModules() {
  for (const auto& [module, mt] : modules_) {
    vllm_module_names_.insert(ToVllmModuleName(naming_, module));
    if (!mt.packed && !mt.weight) {
      if (mt.scale || mt.shape || mt.zero_point) {
        Add(Severity::kError, "missing-weight-packed", module,
            FileOf(mt.scale   ? *mt.scale
                   : mt.shape ? *mt.shape
                              : *mt.zero_point),
            "quantization tensors without weight_packed or weight: the module has no weights",
            "requantize the module");
      }
      continue;
    }
    TensorMeta meta;
    if (mt.weight) {
      meta = {module + std::string(kWeight), mt.weight->entry->dtype, mt.weight->entry->shape};
    } else {
      // A packed weight is a 2-D float weight before packing; only its name decides the rules.
      meta = {module + std::string(kPacked), DType::kBF16, {1, 1}};
    }
    if (auto not_linear = NotALinearReason(meta, module)) {
      if (!mt.packed) continue;
      std::string code = not_linear->starts_with("embedding") ? "quantized-embedding"
                         : not_linear->starts_with("lm_head") ? "quantized-lm-head"
                                                              : "quantized-non-linear";
      Add(Severity::kError, code, module, FileOf(*mt.packed),
          fmt::format("stored as weight_packed, but {}: vLLM cannot load it", *not_linear),
          "keep it dense (add it to ignore and requantize)");
      continue;
    }
    CheckLinear(module, mt, meta);
  }
  CheckFusedAgreement();
}

void Checker::CheckLinear(const std::string& module, const ModuleTensors& mt,
                          const TensorMeta& meta) {
  static const FusedMapping kNoMapping;
  LinearModule lm;
  lm.module = module;
  lm.vllm_name = ToVllmModuleName(naming_, module);
  lm.fused = FusedModuleName(lm.vllm_name);
  lm.packed = mt.packed.has_value();
  if (mt.scale) lm.scale_dtype = std::string(DTypeName(mt.scale->entry->dtype));
  vllm_module_names_.insert(lm.fused);
  const std::string file = FileOf(mt.packed ? *mt.packed : *mt.weight);
  (lm.packed ? report_.quantized_modules : report_.dense_linear_modules)++;

  IgnoreDecision with = DecideIgnore(lm.fused, ignore_, StandardFusedMapping());
  IgnoreDecision without = DecideIgnore(lm.fused, ignore_, kNoMapping);
  if (with.shards_disagree) {
    Add(Severity::kError, "fused-shards-disagree", lm.fused, "config.json",
        "the ignore list ignores some shards of the fused module and not others: older vLLM "
        "fails, newer vLLM loads the whole fused layer dense",
        "make the ignore entries cover all of q/k/v (or gate/up), e.g. "
        "re:.*self_attn\\.(q|k|v|qkv)_proj$");
  }
  if (IsDraft(family_.family) && with.ignored != without.ignored) {
    Add(Severity::kError, "ignore-needs-fused-mapping", lm.fused, "config.json",
        fmt::format("the module is {} only {} fused-name expansion; drafts may get no "
                    "packed_modules_mapping (vllm#53116), so vLLM may treat it the other way",
                    with.ignored ? "ignored" : "quantized", with.ignored ? "with" : "without"),
        "write entries that match both the fused and the shard names, e.g. "
        "re:.*self_attn\\.(q|k|v|qkv)_proj$");
  }
  const ConfigGroup* group = MatchingGroup(lm.vllm_name, lm.fused);
  bool vllm_quantized = group != nullptr && !with.ignored;
  if (mt.packed && mt.weight) {
    Add(Severity::kError, "weight-and-packed", module, file,
        "both .weight and .weight_packed are stored; vLLM fails on whichever it did not expect",
        "keep one form");
  }
  if (vllm_quantized && !mt.packed) {
    Add(Severity::kError, "vllm-expects-quantized", module, file,
        fmt::format("config group {} targets vLLM module '{}' and no ignore entry matches it, but "
                    "the checkpoint holds .weight: loading fails (KeyError / no parameter named "
                    "'{}.weight')",
                    group->name, lm.fused, lm.fused),
        fmt::format("add \"{}\" (vLLM's name) to ignore, or quantize the module", lm.fused));
  }
  if (!vllm_quantized && mt.packed) {
    std::string why = !qc_ ? "config.json has no compressed-tensors quantization_config"
                      : group == nullptr
                          ? "no config group targets it"
                          : fmt::format("the ignore list matches vLLM module '{}'", lm.fused);
    Add(Severity::kError, "vllm-expects-dense", module, file,
        fmt::format("stored as weight_packed, but vLLM builds it dense ({}): loading fails with "
                    "\"There is no module or parameter named '{}.weight_packed'\"",
                    why, lm.vllm_name),
        "remove the ignore entry that matches it (or store the module dense)");
  }
  if ((mt.packed || vllm_quantized)) {
    if (auto keep = FamilyKeepReason(family_, module)) {
      bool dflash_qkv =
          family_.family == ModelFamily::kDFlash && keep->find("q/k/v") != std::string::npos;
      Add(Severity::kError, dflash_qkv ? "dflash-qkv-quantized" : "family-keeps-dense", module,
          file, fmt::format("quantized, but {}", *keep),
          "keep it dense: requantize with sparkulator quantize (it applies the family preset)");
    }
  }
  if (mt.packed) {
    const WeightQuantArgs* args = ArgsFor(group, qc_);
    if (args != nullptr) {
      auto dims = CheckPackedTensors(module, mt, *args);
      if (dims) {
        int64_t g = args->strategy == "group" ? args->group_size.value_or(0) : kChannelWise;
        if (auto rule = KernelRuleViolation(lm.fused, dims->first, dims->second, args->num_bits, g,
                                            options_.tp)) {
          Add(Severity::kError, "kernel-rule", module, file,
              fmt::format("[{}, {}] at --tp {}: {}; vLLM has no kernel for it", dims->first,
                          dims->second, options_.tp, *rule),
              "keep the module dense (ignore it) or use another group size / --tp");
        }
      }
    }
  }
  (void)meta;
  linears_.push_back(std::move(lm));
}

std::optional<std::pair<int64_t, int64_t>> Checker::CheckPackedTensors(
    const std::string& module, const ModuleTensors& mt, const WeightQuantArgs& args) {
  const TensorEntry& packed = *mt.packed->entry;
  const std::string file = FileOf(*mt.packed);
  int bits = args.num_bits;
  if (packed.dtype != DType::kI32 || packed.shape.size() != 2 || (bits != 4 && bits != 8)) {
    Add(Severity::kError, "weight-packed-shape", module, file,
        fmt::format("weight_packed is {} {}; expected a 2-D I32 tensor", DTypeName(packed.dtype),
                    ShapeToString(packed.shape)),
        "requantize the module");
    return std::nullopt;
  }
  int64_t out = packed.shape[0], in = packed.shape[1] * 32 / bits;
  if (!mt.shape) {
    Add(Severity::kError, "missing-weight-shape", module, file,
        "weight_shape is missing: vLLM cannot unpack the weight", "requantize the module");
  } else {
    const TensorEntry& shape = *mt.shape->entry;
    if (shape.dtype != DType::kI64 || shape.shape != std::vector<int64_t>{2}) {
      Add(Severity::kError, "weight-shape-invalid", module, FileOf(*mt.shape),
          fmt::format("weight_shape is {} {}; expected I64 [2]", DTypeName(shape.dtype),
                      ShapeToString(shape.shape)),
          "requantize the module");
    } else {
      int64_t dims[2] = {0, 0};
      Status read =
          Reader(*mt.shape).ReadTensor(shape, {reinterpret_cast<uint8_t*>(dims), sizeof dims});
      if (!read.ok()) {
        Add(Severity::kError, "safetensors-invalid", module, FileOf(*mt.shape), read.message(), "");
      } else {
        out = dims[0];
        in = dims[1];
      }
    }
  }
  if (out <= 0 || in <= 0 || packed.shape != PackedShape(out, in, bits)) {
    Add(Severity::kError, "weight-packed-shape", module, file,
        fmt::format(
            "weight_packed is {} but weight_shape [{}, {}] at {} bits needs {}",
            ShapeToString(packed.shape), out, in, bits,
            out > 0 && in > 0 ? ShapeToString(PackedShape(out, in, bits)) : "positive dims"),
        "requantize the module");
    return std::nullopt;
  }
  int64_t g = args.strategy == "group" ? args.group_size.value_or(0) : kChannelWise;
  if (g != kChannelWise && (g <= 0 || in % g != 0)) {
    Add(Severity::kError, "group-does-not-divide", module, file,
        fmt::format("in_features {} is not a multiple of group_size {}", in, g),
        "keep the module dense (ignore it)");
    return std::nullopt;
  }
  if (!mt.scale) {
    Add(Severity::kError, "missing-weight-scale", module, file,
        "weight_scale is missing: vLLM does not report it and runs on uninitialised memory",
        "requantize the module (or restore the shard that held weight_scale)");
  } else {
    const TensorEntry& scale = *mt.scale->entry;
    std::vector<int64_t> want = ScaleShape(out, in, g);
    if (!IsQuantizableFloat(scale.dtype) || scale.shape != want) {
      Add(Severity::kError, "weight-scale-shape", module, FileOf(*mt.scale),
          fmt::format("weight_scale is {} {}; expected a BF16/F16/F32 tensor {}",
                      DTypeName(scale.dtype), ShapeToString(scale.shape), ShapeToString(want)),
          "requantize the module");
    } else {
      CheckScaleValues(module, *mt.scale);
    }
  }
  if (args.symmetric && mt.zero_point) {
    Add(Severity::kError, "zero-point-in-symmetric", module, FileOf(*mt.zero_point),
        "weight_zero_point in a symmetric scheme: vLLM has no parameter for it and fails to load",
        "delete the weight_zero_point tensors, or declare symmetric: false if they are real");
  } else if (!args.symmetric && !mt.zero_point) {
    Add(Severity::kError, "missing-zero-point", module, file,
        "asymmetric scheme without weight_zero_point: vLLM dequantizes with an uninitialised "
        "zero point",
        "requantize the module");
  } else if (!args.symmetric) {
    const TensorEntry& zp = *mt.zero_point->entry;
    std::vector<int64_t> want = ZeroPointShape(out, in, bits, g);
    if (zp.dtype != DType::kI32 || zp.shape != want) {
      Add(Severity::kError, "zero-point-shape", module, FileOf(*mt.zero_point),
          fmt::format("weight_zero_point is {} {}; expected I32 {} (packed along the out dim)",
                      DTypeName(zp.dtype), ShapeToString(zp.shape), ShapeToString(want)),
          "requantize the module");
    }
  }
  return std::pair{out, in};
}

void Checker::CheckScaleValues(const std::string& module, const Located& scale) {
  const TensorEntry& e = *scale.entry;
  std::vector<uint8_t> bytes(e.nbytes());
  Status read = Reader(scale).ReadTensor(e, bytes);
  if (!read.ok()) {
    Add(Severity::kError, "safetensors-invalid", module, FileOf(scale), read.message(), "");
    return;
  }
  std::vector<float> values(e.num_elements());
  ConvertToFloat(e.dtype, bytes.data(), values.data(), values.size());
  size_t nonfinite = 0, zero = 0, negative = 0;
  for (float v : values) {
    if (!std::isfinite(v)) {
      ++nonfinite;
    } else if (v == 0.0f) {
      ++zero;
    } else if (v < 0.0f) {
      ++negative;
    }
  }
  auto add = [&](size_t count, const char* code, const char* what) {
    if (count == 0) return;
    Add(Severity::kError, code, module, FileOf(scale),
        fmt::format("{} of {} weight_scale values are {}: the dequantized weights are garbage",
                    count, values.size(), what),
        "requantize the module from the source weights");
  };
  add(nonfinite, "scale-not-finite", "NaN or Inf");
  add(zero, "scale-zero", "zero");
  add(negative, "scale-negative", "negative");
}

void Checker::CheckFusedAgreement() {
  std::map<std::string, std::vector<const LinearModule*>> by_fused;
  for (const LinearModule& lm : linears_) by_fused[lm.fused].push_back(&lm);
  for (const auto& [fused, members] : by_fused) {
    if (members.size() < 2) continue;
    bool any_packed = false, any_dense = false;
    std::set<std::string> scale_dtypes;
    for (const LinearModule* m : members) {
      (m->packed ? any_packed : any_dense) = true;
      if (m->packed && !m->scale_dtype.empty()) scale_dtypes.insert(m->scale_dtype);
    }
    if (any_packed && any_dense) {
      Add(Severity::kError, "fused-shards-disagree", fused, "",
          "some shards of the fused module are quantized and others dense; vLLM loads one fused "
          "layer and fails",
          "quantize all shards or keep all dense");
    } else if (scale_dtypes.size() > 1) {
      Add(Severity::kError, "fused-shards-disagree", fused, "",
          fmt::format("the shards' weight_scale dtypes differ ({})", fmt::join(scale_dtypes, ", ")),
          "requantize the shards from one source dtype");
    }
  }
}

void Checker::CheckIgnoreEntries() {
  // Shard names of fused modules stored fused (Laguna qkv_proj) are names vLLM matches too.
  std::set<std::string> names = vllm_module_names_;
  for (const std::string& name : vllm_module_names_) {
    size_t dot = name.rfind('.');
    std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
    auto it = StandardFusedMapping().find(leaf);
    if (it == StandardFusedMapping().end()) continue;
    for (const std::string& shard : it->second) names.insert(name.substr(0, dot + 1) + shard);
  }
  for (const LinearModule& lm : linears_) names.insert(lm.vllm_name);
  for (const ModulePattern& p : ignore_) {
    if (p.text() == "lm_head") continue;  // vLLM's model always has it (the target's, for drafts)
    bool matched =
        std::any_of(names.begin(), names.end(), [&](const std::string& n) { return p.Matches(n); });
    if (matched) continue;
    std::string literal;
    for (const auto& [module, mt] : modules_) {
      if (p.Matches(module)) {
        literal = module;
        break;
      }
    }
    if (!literal.empty()) {
      std::string vllm = FusedModuleName(ToVllmModuleName(naming_, literal));
      Add(Severity::kError, "ignore-matches-nothing", p.text(), "config.json",
          fmt::format("the entry matches the checkpoint name '{}' but no vLLM module name; vLLM "
                      "calls it '{}', so the entry is silently ignored and the module is treated "
                      "as quantized",
                      literal, vllm),
          fmt::format("write vLLM's name: \"{}\" (or a re: pattern for it)", vllm));
    } else {
      Add(Severity::kWarning, "ignore-matches-nothing", p.text(), "config.json",
          "the entry matches no module of the model under vLLM's naming",
          "remove it, or fix it to vLLM's module names");
    }
  }
}

// "w4a16 (group 128)"-like label of a config's quantization, or "unquantized (<dtype>)".
std::string PrecisionOf(const ModelConfig& config) {
  if (!config.has_quantization_config) {
    return fmt::format("unquantized ({})",
                       config.torch_dtype.empty() ? "dtype unknown" : config.torch_dtype);
  }
  auto qc = ParseQuantizationConfig("config.json", config.json);
  if (!qc.ok()) return "quantized (unreadable quantization_config)";
  for (const ConfigGroup& g : qc->groups) {
    if (g.weights) return qc->quant_method + " " + SchemeLabel(*g.weights);
  }
  const auto& q = config.json["quantization_config"];
  return q.contains("quant_method") && q["quant_method"].is_string()
             ? q["quant_method"].get<std::string>()
             : "quantized";
}

Status Checker::CheckTarget() {
  SPK_ASSIGN_OR_RETURN(std::string target_dir, ResolveModelPath(options_.target));
  std::string path = target_dir + "/config.json";
  SPK_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  SPK_ASSIGN_OR_RETURN(ModelConfig target, ParseModelConfig(path, text));
  auto mismatch = [&](const char* code, const char* what, std::optional<int64_t> draft,
                      std::optional<int64_t> tgt, const char* fix) {
    if (draft && tgt && *draft != *tgt) {
      Add(Severity::kError, code, "", "config.json",
          fmt::format("the draft's {} is {}, the target's is {}", what, *draft, *tgt), fix);
    }
  };
  mismatch("target-hidden-size", "hidden_size", config_.hidden_size, target.hidden_size,
           "use the draft built for this target");
  mismatch("target-vocab-size", "vocab_size", config_.vocab_size, target.vocab_size,
           "use the draft built for this target (it shares the target's lm_head and tokenizer)");
  mismatch("target-layer-count", "num_target_layers", config_.num_target_layers,
           target.num_hidden_layers,
           "use the draft built for this target (vLLM's names of the draft's layers follow the "
           "target's layer count)");
  if (target.num_hidden_layers) {
    for (int64_t id : config_.dflash_target_layer_ids) {
      if (id < 0 || id >= *target.num_hidden_layers) {
        Add(Severity::kError, "target-layer-ids", "", "config.json",
            fmt::format("dflash_config.target_layer_ids holds {}, but the target has {} layers", id,
                        *target.num_hidden_layers),
            "use the draft built for this target");
      }
    }
  }
  // The precision the draft was calibrated against: recorded by the producer when known
  // (config.json "sparkulator".target_precision), else the unquantized target drafts are
  // published for.
  std::string expected = "unquantized";
  auto rec = config_.json.find("sparkulator");
  if (rec != config_.json.end() && rec->is_object() && rec->contains("target_precision") &&
      (*rec)["target_precision"].is_string()) {
    expected = (*rec)["target_precision"].get<std::string>();
  }
  std::string actual = PrecisionOf(target);
  bool expected_quantized = !expected.starts_with("unquantized");
  bool actual_quantized = target.has_quantization_config;
  if (expected_quantized != actual_quantized ||
      (expected_quantized && actual.find(expected) == std::string::npos)) {
    Add(Severity::kWarning, "target-precision-mismatch", "", "config.json",
        fmt::format("the draft was built for a {} target, this target is {}: acceptance can drop "
                    "to ~0% while output stays correct (a silent slowdown)",
                    expected, actual),
        "pair the draft with the target precision it was calibrated for");
  }
  report_.serve = ServeLine(family_.family, dir_, options_.target);
  if (!config_.num_target_layers && !options_.target_layers) {
    options_.target_layers = target.num_hidden_layers;
  }
  return Status::Ok();
}

Result<CheckReport> Checker::Run() {
  if (options_.tp < 1) return Status::Usage("--tp must be at least 1");
  LoadFiles();
  if (!LoadConfig()) return report_;
  std::vector<std::string> names;
  for (const auto& [name, located] : tensors_) names.push_back(name);
  family_ = DetectFamily(config_, names, Preset::kAuto);
  if (!options_.target.empty()) SPK_RETURN_IF_ERROR(CheckTarget());
  naming_ = NamingFor(family_, config_, names, options_.target_layers);
  report_.family = std::string(FamilyName(family_.family));
  report_.naming = naming_.ToString();
  if (report_.serve.empty()) report_.serve = ServeLine(family_.family, dir_, "<target>");
  if (IsDraft(family_.family) && !naming_.offset_known) {
    Add(Severity::kWarning, "draft-offset-unknown", "", "config.json",
        "the draft's vLLM layer names depend on the target's layer count, which config.json does "
        "not give; per-layer ignore entries cannot be checked",
        "pass --target TARGET or --target-layers N");
  }
  CheckQuantConfig();
  CollectModules();
  CheckModules();
  CheckIgnoreEntries();
  return std::move(report_);
}

}  // namespace

Result<CheckReport> CheckCheckpoint(FileSystem* fs, const CheckOptions& options) {
  SPK_ASSIGN_OR_RETURN(std::string dir, ResolveModelPath(options.checkpoint));
  Checker checker(fs, options, dir);
  return checker.Run();
}

Json CheckReportToJson(const CheckReport& r) {
  Json findings = Json::array();
  for (const Finding& f : r.findings) findings.push_back(FindingToJson(f));
  return Json{{"path", r.path},
              {"ok", r.ok()},
              {"errors", CountSeverity(r.findings, Severity::kError)},
              {"warnings", CountSeverity(r.findings, Severity::kWarning)},
              {"family", r.family},
              {"vllm_naming", r.naming},
              {"scheme", r.scheme},
              {"shards", r.shards},
              {"quantized_modules", r.quantized_modules},
              {"dense_linear_modules", r.dense_linear_modules},
              {"serve", r.serve},
              {"findings", findings}};
}

std::string RenderCheckReport(const CheckReport& r) {
  std::string out = fmt::format(
      "{}\n  family {}, vLLM naming: {}\n  scheme {}; {} quantized Linear module(s), {} dense\n",
      r.path, r.family.empty() ? "?" : r.family, r.naming.empty() ? "?" : r.naming, r.scheme,
      r.quantized_modules, r.dense_linear_modules);
  for (const Finding& f : r.findings) out += RenderFinding(f);
  size_t errors = CountSeverity(r.findings, Severity::kError);
  size_t warnings = CountSeverity(r.findings, Severity::kWarning);
  out += errors == 0 ? fmt::format("OK: vLLM loads it right ({} warning(s))\n", warnings)
                     : fmt::format("FAILED: {} error(s), {} warning(s)\n", errors, warnings);
  if (!r.serve.empty()) out += fmt::format("serve with: {}\n", r.serve);
  return out;
}

}  // namespace spk
