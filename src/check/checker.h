// Internal to `sparkulator check` (not a public header): the Checker that CheckCheckpoint runs,
// shared by its parts: check_files.cc (shards, index, safetensors rules), check_config.cc
// (config.json and quantization_config), check_modules.cc (naming, ignore, vLLM's quantized/dense
// decision, family rules), check_tensors.cc (packed tensors and scales), check_target.cc (the
// draft/target pairing) and check.cc (the run, the vLLM it is judged for, the report).
// One Checker per check; call from one thread. Errors: see check.h (problems are Findings).
#pragma once

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "check/check.h"
#include "check/draft_rules.h"
#include "check/finding_codes.h"
#include "check/vllm_rules.h"
#include "checkpoint/family.h"
#include "checkpoint/map_rules.h"
#include "checkpoint/model_config.h"
#include "checkpoint/module_pattern.h"
#include "checkpoint/plan.h"
#include "checkpoint/quant_config.h"
#include "quant/scheme.h"
#include "safetensors/index.h"
#include "safetensors/reader.h"

namespace spk::check_internal {

constexpr std::string_view kPacked = ".weight_packed";
constexpr std::string_view kScale = ".weight_scale";
constexpr std::string_view kShape = ".weight_shape";
constexpr std::string_view kZeroPoint = ".weight_zero_point";
constexpr std::string_view kWeight = ".weight";
constexpr std::string_view kGlobalScale = ".weight_global_scale";

// Formats compressed-tensors 0.19 knows (its CompressionFormat enum) that no row of the scheme
// registry writes, so this checker does not verify them tensor by tensor (the registry's formats
// it does: check_formats.cc).
inline const std::set<std::string>& FormatsNotChecked() {
  static const std::set<std::string> kFormats = {
      "naive-quantized", "marlin-24", "sparse-24-bitmask",
      "sparse-bitmask",  "dense",     "mixed-precision"};
  return kFormats;
}

struct Located {
  size_t shard;
  const TensorEntry* entry;
};

// The tensors that make up one module of the checkpoint.
struct ModuleTensors {
  // `packed` is the tensor holding a quantized module's values: weight_packed, or for the
  // unpacked formats a .weight that checkpoint/quantized_modules.h calls quantized (then `weight`
  // is empty).
  std::optional<Located> weight, packed, scale, shape, zero_point, global_scale;
};

struct LinearModule {
  std::string module;  // checkpoint name
  std::string vllm_name;
  std::string fused;
  bool packed = false;
  std::string scale_dtype;
  std::optional<float> global_scale;  // NVFP4's weight_global_scale, when it reads as a float
  std::string global_scale_file;
  int64_t out_features = 0;  // rows, when the tensors give them: vLLM's fused GEMM sums them
  // [out, in] and the file of a module of the config's registry format whose tensors verified.
  struct CodecShape {
    int64_t out = 0, in = 0;
    std::string file;
  };
  std::optional<CodecShape> codec_shape;
  // A pack-quantized module whose tensors verified: its shape and config arguments
  // (CheckPackedKernelRules).
  struct PackedShape {
    int64_t out = 0, in = 0, group_size = 0;
    int bits = 0;
    bool symmetric = true;
    std::string file;
  };
  std::optional<PackedShape> packed_shape;
};

class Checker {
 public:
  Checker(FileSystem* fs, const CheckOptions& options, std::string dir)
      : fs_(fs), options_(options), dir_(std::move(dir)) {
    report_.path = dir_;
  }

  Result<CheckReport> Run();

 private:
  // A finding of a row of check/finding_codes.h: a code of one severity alone, else the code and
  // the severity (one of the row's).
  void Add(FixedCode code, std::string module, std::string file, std::string message,
           std::string fix) {
    Push(MakeFinding(code, std::move(module), std::move(file), std::move(message), std::move(fix)));
  }
  void Add(FindingCode code, Severity severity, std::string module, std::string file,
           std::string message, std::string fix) {
    Push(MakeFinding(code, severity, std::move(module), std::move(file), std::move(message),
                     std::move(fix)));
  }
  // A finding made by MakeFinding (draft_rules.h).
  void Push(Finding f) {
    // One finding per (code, module, file): fused layers are reached once per shard.
    if (!reported_.insert(f.code + "\n" + f.module + "\n" + f.file).second) return;
    report_.findings.push_back(std::move(f));
  }

  Status LoadFiles();
  Status OpenShard(const std::string& file, bool listed);  // IoError: the read failed
  void CheckIndexAgainstShards();
  Result<bool> LoadConfig();  // false: config.json is missing or invalid (a finding)
  void CheckQuantConfig();
  void CollectModules();
  void CheckModules();
  void CheckLinear(const std::string& module, const ModuleTensors& mt, const TensorMeta& meta);
  void CheckRouter(const std::string& module, const std::string& file);
  std::optional<std::pair<int64_t, int64_t>> CheckPackedTensors(const std::string& module,
                                                                const ModuleTensors& mt,
                                                                const WeightQuantArgs& args);
  void CheckScaleValues(const std::string& module, const Located& scale);
  // check_formats.cc: the registry formats other than pack-quantized, by their codec.
  void MarkUnpackedValues();
  std::optional<std::pair<int64_t, int64_t>> CheckCodecTensors(const std::string& module,
                                                               const ModuleTensors& mt,
                                                               LinearModule* lm);
  // The registry format's kernel rules (checkpoint/gemm.h JudgeGemm) for every module with a
  // codec_shape, each judged with the rows of its whole fused GEMM.
  void CheckVllmShapeRules();
  void CheckPackedKernelRules(const std::map<std::string, int64_t>& fused_out);
  // A WNA16 kernel shape finding (no-vllm-kernel, kernel-rule, kernel-rule-platform) as given;
  // with --vllm-batch-invariant on a release whose map says such a Linear then loads without a
  // kernel, the info finding vllm-batch-invariant-no-kernel in its place. The fix names
  // VLLM_BATCH_INVARIANT=1 where it helps, or, with the flag, that it does not.
  void AddWna16KernelFinding(FixedCode code, std::string module, std::string file,
                             std::string message, std::string fix);
  void CheckGlobalScaleAgreement(const std::vector<const LinearModule*>& members,
                                 const std::string& fused);
  void CheckFusedAgreement();
  void CheckIgnoreEntries();
  void CheckTargetsMatchSomething();
  // Every name vLLM matches ignore entries and targets against: each module's vLLM name, the fused
  // module's and its shards' (a fused module stored fused is matched by its shard names too).
  std::set<std::string> NamesVllmMatches() const;
  // The checkpoint module that `pattern` matches by the name it has without vLLM's renaming (the
  // checkpoint's, or vLLM's without the draft_model proposer prefix), or "".
  std::string NameMatchedInstead(const ModulePattern& pattern) const;
  // A plain model served beside --target: vLLM builds it as a method="draft_model" draft.
  bool ServedAsDraftModel() const;
  Status ResolveModuleMap();     // check_map.cc: the map of the release judged, into the family
  void BuildTreeMap();           // check_map.cc: the map --vllm DIR builds (or why not)
  void CheckAgainstModuleMap();  // check_map.cc
  void CheckWhoseQuantConfig(const MappedArchitecture& arch);  // check_map.cc
  void CheckSpeculatorsFormat();                               // check_map.cc
  void CheckMtpLayerBits();                                    // check_map.cc
  void CheckUnstoredParams();                                  // check_map.cc
  Status CheckTarget();
  Status ResolveVllm();
  void ReportMappingDependence(const LinearModule& lm, const IgnoreDecision& with);
  RuleJudgement JudgeDraftFusedMapping() const;  // check_modules.cc
  void NoteDraftModule(const std::string& module, const ModuleTensors& mt, bool vllm_quantized,
                       std::optional<std::pair<int64_t, int64_t>> dims);

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
  std::optional<CheckpointScheme> scheme_;  // the registry row of the checkpoint, when it has one
  std::vector<ModulePattern> ignore_;
  std::vector<std::vector<std::optional<ModulePattern>>> targets_;  // per group; nullopt: "Linear"
  std::map<std::string, ModuleTensors> modules_;
  std::vector<LinearModule> linears_;
  std::set<std::string> vllm_module_names_;
  VllmTarget vllm_;
  MapContext map_;           // vLLM's module map of the release judged (checkpoint/map_rules.h)
  std::string map_warning_;  // the map is another release's
  std::optional<ModuleMap> own_map_;  // a map given as a file or built from --vllm DIR
  DraftFacts draft_;
  // Drafts: whether vLLM gives their quant config no fused-name mapping (vllm_rules.h).
  std::optional<RuleJudgement> draft_mapping_;
  std::optional<int64_t> target_layers_;         // num_hidden_layers of --target's config
  std::optional<std::string> target_precision_;  // --target's PrecisionOf, when given
};

// Group sizes vLLM's WNA16 kernels run: the registry's Marlin sizes, or channel-wise.
inline bool IsKernelGroupSize(int64_t g) { return g == kChannelWise || IsMarlinGroupSize(g); }

inline bool HasSuffix(const std::string& name, std::string_view suffix) {
  return name.size() > suffix.size() && name.ends_with(suffix);
}

// Attention's q/k/v (or their fused qkv_proj) under a `self_attn` module.
inline bool IsAttentionQkv(const std::string& module) {
  const size_t leaf_at = module.rfind('.');
  if (leaf_at == std::string::npos) return false;
  const std::string_view parent = std::string_view(module).substr(0, leaf_at);
  return (parent == "self_attn" || parent.ends_with(".self_attn")) &&
         IsQkvLeaf(std::string_view(module).substr(leaf_at + 1));
}

}  // namespace spk::check_internal
