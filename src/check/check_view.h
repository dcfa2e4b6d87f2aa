// Internal to `sparkulator check` (not a public header): the CheckView, everything the rules of
// check/check_rules.h read about one checkpoint, built once by LoadCheckView and then only read.
//
// Built in this order (check_load.cc, check_view_modules.cc): the vLLM release judged; the files
// (shards, index, readers, tensors); config.json; the family; vLLM's module map; --target's
// config; the naming; quantization_config (its scheme row, targets, ignore patterns); the modules
// and their tensors; then one derived step, the Linear modules (DeriveLinears): for each, vLLM's
// names, the ignore decisions, the config group, whether vLLM builds it quantized, and the verdict
// on its tensors (shapes a later rule judges kernels by, and the problems found reading them,
// which the rule module-tensors reports). No rule writes to the view; a fact a rule needs from
// another is a field here.
//
// Ownership: the view owns the readers and the parsed configs; Located, LinearModule::group,
// DraftFacts::config and ModuleEntry point into it, so it is never copied or moved once built
// (LoadCheckView returns it by unique_ptr). Call from one thread. Errors: LoadCheckView's Result
// fails as check.h says (a disk that does not give the files back, bad options); what is wrong
// inside the files is a finding, given to the FindingSink under a load step of the rules table.
#pragma once

#include <fmt/format.h>

#include <map>
#include <memory>
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
#include "model/model_config.h"
#include "model/quant_config.h"
#include "model/target_precision.h"
#include "plan/plan.h"
#include "quant/scheme.h"
#include "quant/stored_names.h"
#include "safetensors/index.h"
#include "safetensors/reader.h"
#include "vllm/family.h"
#include "vllm/map_rules.h"
#include "vllm/module_pattern.h"
#include "vllm/target_model.h"
#include "vllm/vllm_build.h"

namespace spk::check_internal {

class FindingSink;

// Formats compressed-tensors 0.19 knows (its CompressionFormat enum) that no row of the scheme
// registry writes, so check does not verify them tensor by tensor (the registry's formats it
// does: check_formats.cc).
inline const std::set<std::string>& FormatsNotChecked() {
  static const std::set<std::string> kFormats = {
      "naive-quantized", "marlin-24", "sparse-24-bitmask",
      "sparse-bitmask",  "dense",     "mixed-precision"};
  return kFormats;
}

// Findings a step of building the view makes, kept until the rule that reports them runs.
class FindingList {
 public:
  void Add(FixedCode code, std::string module, std::string file, std::string message,
           std::string fix) {
    items.push_back(
        MakeFinding(code, std::move(module), std::move(file), std::move(message), std::move(fix)));
  }
  std::vector<Finding> items;
};

struct Located {
  size_t shard;
  const TensorEntry* entry;
};

// The tensors that make up one module of the checkpoint.
struct ModuleTensors {
  // `packed` is the tensor holding a quantized module's values: weight_packed, or for the
  // unpacked formats a .weight that model/quantized_modules.h calls quantized (then `weight`
  // is empty).
  std::optional<Located> weight, packed, scale, shape, zero_point, global_scale;
};

// What vLLM builds of one Linear module of the checkpoint, and what its tensors verified to.
struct LinearModule {
  std::string module;  // checkpoint name
  std::string vllm_name;
  std::string fused;
  bool packed = false;
  std::string scale_dtype;
  std::string file;  // the file of its values (weight_packed, or .weight)
  // DecideIgnore of the fused name with and without the standard fused mapping, and the one vLLM
  // makes (drafts get none where draft_mapping fails).
  IgnoreDecision with_mapping, without_mapping, vllm_decision;
  const ConfigGroup* group = nullptr;  // the config group that targets it, if any
  bool vllm_quantized = false;         // a group targets it and vLLM does not ignore it
  std::optional<float> global_scale;   // NVFP4's weight_global_scale, when it reads as a float
  std::string global_scale_file;
  int64_t out_features = 0;  // rows, when the tensors give them: vLLM's fused GEMM sums them
  // [out, in] and the file of a module of the config's registry format whose tensors verified.
  struct CodecShape {
    int64_t out = 0, in = 0;
    std::string file;
  };
  std::optional<CodecShape> codec_shape;
  // A pack-quantized module whose tensors verified: its shape and config arguments.
  struct PackedShape {
    int64_t out = 0, in = 0, group_size = 0;
    int bits = 0;
    bool symmetric = true;
    std::string file;
  };
  std::optional<PackedShape> packed_shape;
  // What reading its quantized tensors found (check_tensors.cc, check_formats.cc), in the order
  // found; reported by the rule module-tensors.
  std::vector<Finding> tensor_problems;
};

// One module of the checkpoint (tensors grouped by the name before .weight*), in name order.
struct ModuleEntry {
  std::string name;
  ModuleTensors tensors;
  bool has_values() const { return tensors.packed || tensors.weight; }
  // What vLLM builds for it (vllm/vllm_build.h), for a module with values; not_linear is
  // its reason when that is not a Linear.
  std::optional<BuildDecision> build;
  std::optional<std::string> not_linear;
  std::optional<size_t> linear;  // its index in CheckView::linears
};

// quantization_config as read: the parsed view of a compressed-tensors config, or why not.
struct QuantState {
  std::string parse_error;   // quantization_config does not parse
  std::string other_method;  // a quant_method other than compressed-tensors
  std::optional<QuantizationConfigView> qc;
  std::optional<CheckpointScheme> scheme;  // the registry row of the checkpoint, when it has one
  struct GroupTargets {
    std::vector<std::optional<ModulePattern>> patterns;        // nullopt: "Linear"
    std::vector<std::pair<std::string, std::string>> invalid;  // pattern, why it does not compile
  };
  std::vector<GroupTargets> targets;  // per qc->groups
  std::vector<ModulePattern> ignore;
  std::string ignore_error;  // an ignore pattern does not compile
  std::string label;         // the report's scheme
};

struct CheckView {
  CheckView() = default;
  CheckView(const CheckView&) = delete;
  CheckView& operator=(const CheckView&) = delete;

  FileSystem* fs = nullptr;
  CheckOptions options;  // as given
  std::string dir;
  VllmTarget vllm;  // the release the version-dependent rules are judged for

  // The files (load steps files, index).
  std::optional<ShardIndex> index;
  std::vector<SafetensorsReader> readers;
  std::vector<std::string> reader_files;  // parallel to readers: the shards vLLM loads
  std::map<std::string, Located> tensors;
  std::vector<std::pair<std::string, SafetensorsReader>> unlisted;
  // Shards whose header could not be read (each has its safetensors-invalid finding): their
  // tensors are not in `tensors`, so the rules that judge the stored set do not run.
  std::vector<std::string> unreadable_shards;

  // False when config.json is missing or does not parse (a finding): nothing below is set and no
  // rule runs.
  bool config_loaded = false;
  ModelConfig config;
  FamilyDetection family;            // with what the module map adds (ApplyModuleMap)
  MapContext map;                    // vLLM's module map of the release judged (vllm/map_rules.h)
  std::string map_warning;           // the map is another release's
  std::optional<ModuleMap> own_map;  // a map given as a file or built from --vllm DIR
  std::string module_map_source;     // "compiled in", the file, or what built it
  // --target: its config.json, precision (what the pairing compares), quantization in words
  // ("compressed-tensors w4a16 (group 128)") and scheme (vllm/target_model.h).
  std::optional<TargetModel> target;
  // The layer count naming uses: --target-layers, else --target's when config.json lacks one.
  std::optional<int64_t> naming_target_layers;
  VllmNaming naming;
  std::string serve;

  QuantState quant;

  std::vector<ModuleEntry> modules;   // name order
  std::vector<LinearModule> linears;  // module order
  std::set<std::string> vllm_module_names;
  // Every name vLLM matches ignore entries and targets against: each module's vLLM name, the fused
  // module's and its shards' (a fused module stored fused is matched by its shard names too).
  std::set<std::string> names_vllm_matches;
  // Drafts: whether vLLM gives their quant config no fused-name mapping (vllm_rules.h).
  std::optional<RuleJudgement> draft_mapping;
  DraftFacts draft;  // what the release rules of draft_rules.h need
  size_t quantized_modules = 0;
  size_t dense_linear_modules = 0;

  const SafetensorsReader& Reader(const Located& l) const { return readers[l.shard]; }
  std::string FileOf(const Located& l) const { return reader_files[l.shard]; }
  const LinearModule* LinearOf(const ModuleEntry& m) const {
    return m.linear ? &linears[*m.linear] : nullptr;
  }
  // A plain model served beside --target: vLLM builds it as a method="draft_model" draft.
  bool ServedAsDraftModel() const;
  // The checkpoint module that `pattern` matches by the name it has without vLLM's renaming (the
  // checkpoint's, or vLLM's without the draft_model proposer prefix), or "".
  std::string NameMatchedInstead(const ModulePattern& pattern) const;
};

// Builds the view of the checkpoint in `dir`; the problems found reading the files go to `sink`
// under the rules table's load steps. A view whose config_loaded is false has only the files.
Result<std::unique_ptr<CheckView>> LoadCheckView(FileSystem* fs, const CheckOptions& options,
                                                 const std::string& dir, FindingSink& sink);

// The parts of LoadCheckView, in its order (check_files.cc, check_load.cc,
// check_view_modules.cc).
Status LoadFiles(CheckView* view, FindingSink& sink);
void LoadQuantConfig(CheckView* view);
void CollectModules(CheckView* view);
void DeriveLinears(CheckView* view);

// The verdict on a module's quantized tensors (the derived step of DeriveLinears): its [out, in]
// when they verified, the problems found into `problems`. Pack-quantized (check_tensors.cc) and
// the registry's other formats, by their codec (check_formats.cc; `lm` gets NVFP4's global scale).
std::optional<std::pair<int64_t, int64_t>> VerifyPackedTensors(const CheckView& view,
                                                               const std::string& module,
                                                               const ModuleTensors& mt,
                                                               const WeightQuantArgs& args,
                                                               FindingList* problems);
std::optional<std::pair<int64_t, int64_t>> VerifyCodecTensors(const CheckView& view,
                                                              const std::string& module,
                                                              const ModuleTensors& mt,
                                                              LinearModule* lm,
                                                              FindingList* problems);
// The values of a weight_scale tensor (BF16/F16/F32, E4M3, E8M0): finite, non-zero, positive.
void VerifyScaleValues(const CheckView& view, const std::string& module, const Located& scale,
                       FindingList* problems);
// A .weight that holds a quantized module's values becomes that module's `packed` tensor.
void MarkUnpackedValues(CheckView* view);

// Group sizes vLLM's WNA16 kernels run: the registry's Marlin sizes, or channel-wise.
inline bool IsKernelGroupSize(int64_t g) { return g == kChannelWise || IsMarlinGroupSize(g); }

inline bool HasSuffix(const std::string& name, std::string_view suffix) {
  return name.size() > suffix.size() && name.ends_with(suffix);
}

}  // namespace spk::check_internal
