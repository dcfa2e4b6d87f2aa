// The plan's rule from vLLM's module map (vllm/vllm_module_map.h): which Linear weights of a
// checkpoint vLLM would load quantized in the release judged, and why the others stay dense.
//
// Safe by default: a weight the map shows as anything but a quantized Linear that vLLM leaves to
// its kernels (no scheme, a head built without the quant config, a weight the forward reads
// directly, a module the map does not list) stays dense with its reason. A draft (or a model with
// MTP layers) whose architecture no map knows gets only the standard decoder Linears quantized,
// and the plan warns with what it kept dense: a draft's heads are where vLLM builds modules
// without the quant config. A plain model of an unknown architecture keeps model_free_ptq's rule
// (every Linear weight; byte-equal output), and the plan warns with the Linears no map verified.
// The family rules (plan/plan.h FamilyKeepReason) still apply on top; `--preset none`
// turns both off.
//
// Pure functions over values; thread-safe. No errors: every tensor gets a verdict.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_config.h"
#include "quant/scheme.h"
#include "vllm/family.h"
#include "vllm/vllm_module_map.h"

namespace spk {

// What the map knows about one checkpoint: its architecture and, for a model with MTP layers, the
// MTP draft architecture vLLM builds for them. All null when no map applies.
struct MapContext {
  const ModuleMap* map = nullptr;
  const MappedArchitecture* architecture = nullptr;
  const MappedArchitecture* mtp = nullptr;
  std::string architecture_name;  // config.json's first architecture, for messages
  bool draft = false;  // a draft or MTP layers: an unknown architecture keeps non-standard dense
  // The compressed-tensors format of the weights judged ("float-quantized"), whose verdict the map
  // gives (MappedModule::QuantizedUnder); empty: the base (W4A16) verdict. DecideVllmBuild sets it
  // from BuildInputs::scheme, so the plan, check and inspect judge by the scheme written.
  std::string_view scheme_format;
};

MapContext ResolveMapContext(const ModuleMap* map, const ModelConfig& config,
                             const FamilyDetection& family);

// What the map adds to the family: the method vLLM serves the architecture with, and that an
// architecture the markers call an LLM is a draft (EAGLE-1's LlamaForCausalLM layout under an
// Eagle* architecture), with the default number of speculative tokens of a one-token head; a
// DSpark draft's is its block size, as vLLM's default for method dspark.
void ApplyModuleMap(const MapContext& context, const ModelConfig& config, FamilyDetection* family);

// Gives `naming` the map's architecture of a draft or of MTP layers (VllmNaming::
// map_architecture), so that ToVllmModuleName follows what vLLM renames; a plain model's naming
// stays as it is. Call after NamingFor, which sets the layer offset a draft's shift takes.
void AttachModuleMap(const MapContext& context, const ModelConfig& config, VllmNaming* naming);

// What the map says of one Linear weight of checkpoint module `module` (`tensor`: the whole name).
enum class MapVerdict {
  kQuantized,     // a Linear with a compressed-tensors scheme: it loads quantized weights
  kNoScheme,      // built without a scheme (a head under quant_config=None, a plain nn.Linear)
  kReadDirectly,  // the forward reads its .weight itself
  kPlainParam,    // a parameter outside any Linear (an nn.Embedding's weight)
  kNotListed,     // the architecture's map does not list it
  kUnmapped,      // no map knows the architecture
};
struct MapJudgement {
  MapVerdict verdict = MapVerdict::kUnmapped;
  std::string reason;   // for every verdict but kQuantized: why it stays dense
  std::string read_at;  // kReadDirectly: "file:line" of the read
};
MapJudgement JudgeByMap(const MapContext& context, std::string_view module,
                        std::string_view tensor);

// Where the map's generator built the architecture (or the MTP layers) of `context` under W4A16
// but not under the compressed-tensors format `format` (the map's scheme_verdicts error: on 0.32's
// CPU build, no NVFP4/MXFP4 Linear kernel), the warning that its base verdict judges instead, with
// vLLM's error and the platform; "" otherwise. A kernel missing on the generator's platform says
// nothing of a GPU's, so it is a warning, not a refusal.
std::string SchemeNotBuiltWarning(const MapContext& context, std::string_view format);

// How vLLM splits checkpoint module `module` over --tp, from the map's class for it (the MTP
// draft's first, as JudgeByMap); kUnknown when no map lists it (gemm.h then goes by its name).
ParallelStyle MapParallelStyle(const MapContext& context, std::string_view module);

// The plan's use of JudgeByMap: why the weight stays dense, or nullopt to quantize it (a
// quantized Linear, or a standard decoder Linear of an architecture no map knows).
std::optional<std::string> MapKeepReason(const MapContext& context, std::string_view module,
                                         std::string_view tensor);

// The plan's warning when the map does not know the architecture and `unverified` (checkpoint
// module names of non-standard Linears) stayed dense (a draft) or were quantized unverified (a
// plain model); "" when there is nothing to say.
std::string UnmappedArchitectureWarning(const MapContext& context,
                                        const std::vector<std::string>& unverified);

// Why vLLM refuses to load the architecture (or the MTP layers) of `context` from a
// compressed-tensors checkpoint: its load_weights requires KV-cache parameters that such a
// checkpoint does not store (MappedArchitecture::refuses_without); `stored(name)` says whether
// the checkpoint holds the parameter vLLM names `name`. nullopt when it loads.
struct UnstoredRefusal {
  const MappedArchitecture* architecture = nullptr;
  std::vector<std::string> missing;  // vLLM's names of the parameters the checkpoint lacks
  std::string message;               // what vLLM refuses and why, with its error
  std::string fix;                   // what the user can do instead
};
std::optional<UnstoredRefusal> RefusalForUnstoredParams(
    const MapContext& context, const std::function<bool(const std::string&)>& stored);

// Why vLLM's load_weights cannot load the Linear `module` stored as `scheme` stores it (its
// tensors' parameter names, `stored`: "weight_packed", "weight_scale", ...): the architecture that
// loads it (the MTP draft's for a module of the MTP layers: its map lists it or MtpLayerPrefix
// names its layer; else the checkpoint's own) takes only the parameters of its map's
// load_weights_takes_only, and `stored` names another. nullopt when it takes them all or the map
// records no limit. The plan keeps such a module dense; check fails it stored quantized.
std::optional<std::string> LoadWeightsRefusal(const MapContext& context, const ModelConfig& config,
                                              std::string_view module,
                                              const std::vector<std::string_view>& stored,
                                              std::string_view scheme);

// Why vLLM cannot build the routed experts of the architecture of `context` (or of its MTP layers)
// under `scheme` (KernelRule::moe_builds_nowhere), for the plan's refusal and check's finding
// alike; nullopt when the map gives it no routed experts vLLM builds quantized, or a backend takes
// them. The experts count whether or not a checkpoint stores them: vLLM builds them from the
// config.
struct MoeRefusal {
  std::string experts;  // vLLM's name of the first routed-experts module
  std::string message;  // "<scheme>: <architecture> has routed experts ..., and <vLLM's refusal>"
  std::string fix;      // the schemes a backend takes
};
std::optional<MoeRefusal> MoeRefusalFor(const MapContext& context, const QuantScheme& scheme);

// Why vLLM would load none of the quantized Linears of the architecture of `context` (or of its
// MTP layers) while the routed experts `dense_expert` (a stored expert weight) stay dense: its
// load_weights renames each `.weight_packed` to `.weight` when the experts registered no
// w13_weight_packed, and skips the names no parameter has (MappedArchitecture::
// weight_packed_renamed_at: Kimi-K3 MTP). Only formats that store `.weight_packed` are hit;
// nullopt for another, or where the map records no such rename.
std::optional<std::string> PackedDroppedBesideDenseExperts(const MapContext& context,
                                                           const QuantScheme& scheme,
                                                           std::string_view dense_expert);

// True when the map does not know `module`'s architecture and it is not a standard decoder Linear:
// what UnmappedArchitectureWarning lists.
bool IsUnverifiedByMap(const MapContext& context, std::string_view module);

// True for a rule-of-thumb decoder Linear (q/k/v/o, gate/up/down, MLA's, experts'): what a model
// of an unknown architecture gets quantized.
bool IsStandardDecoderLinear(std::string_view module);

}  // namespace spk
