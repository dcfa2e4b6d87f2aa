// What vLLM builds for a checkpoint, per release, from vLLM itself: the module maps that
// tools/vllm_module_map/generate.py records by building every draft architecture of a release's
// registry (and the common targets) with a tiny config and a compressed-tensors quant config
// (data/vllm_module_map/vllm-<release>.json, compiled into the binary). For each checkpoint module
// the map says the module class vLLM builds, whether it got a compressed-tensors scheme (a Linear
// that takes quantized weights) and whether the forward reads its `.weight` directly; for each
// architecture its speculative methods and whether its layers follow the target's. The verdict is
// the W4A16 (pack-quantized) build's, with each other format's where vLLM decides otherwise
// (MappedModule::QuantizedUnder, MappedArchitecture::refused_by_format).
//
// This is the one source of what vLLM quantizes: the plan, `check`, `inspect` and the serve line
// read it (docs/draft-kinds.md lists it, generated from the same files).
//
// Ownership: the compiled-in maps are parsed once, on first use, into immutable statics that live
// for the process; every pointer returned here stays valid. ParseModuleMap returns a map the caller
// owns. Thread-safe. Errors: ChooseModuleMap returns Usage for a release that is not a version;
// ParseModuleMap InvalidInput for a map that is not of kModuleMapSchemaVersion, naming the file and
// the JSON path of the field; a compiled-in map that fails to parse is a build defect and aborts
// (the test suite parses every map).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/model_config.h"
#include "vllm/module_pattern.h"
#include "vllm/vllm_version.h"

namespace spk {

// The module-map schema this reader reads: a map's top-level "schema_version". The generator
// (tools/vllm_module_map/build.py) writes it; a map of another schema is refused, never half read.
inline constexpr int kModuleMapSchemaVersion = 3;

// How vLLM splits a Linear over tensor-parallel ranks, by its class: column-parallel layers
// (ColumnParallelLinear, MergedColumnParallelLinear, QKVParallelLinear) split their output rows,
// RowParallelLinear its input columns, ReplicatedLinear and a plain torch.nn.Linear neither.
// kUnknown: another class, or no map says.
enum class ParallelStyle { kUnknown, kColumn, kRow, kReplicated };
ParallelStyle ParallelStyleOfClass(std::string_view module_class);

// One module of an architecture as vLLM built it.
struct MappedModule {
  std::string vllm_prefix;     // vLLM's name in the tiny model, e.g. "model.layers.2.mlp.down_proj"
  std::string module_class;    // "QKVParallelLinear", "ParallelLMHead", "Linear", ...
  bool quantized = false;      // got a compressed-tensors scheme: it loads quantized weights
  bool read_directly = false;  // the forward reads `.weight` itself (it must stay dense)
  std::string read_at;         // "file:line" of that read, when read_directly
  // The tiny model's checkpoint name this entry of MappedArchitecture::modules is keyed by
  // ("language_model.model.dspark.layers.0.decoder_layer.mlp.down_proj"), whose layer index
  // beside vllm_prefix's shows how vLLM renumbers the layer; empty where the generator traced
  // the module by its path (MoE experts).
  std::string checkpoint_name;
  ParallelStyle parallel = ParallelStyle::kUnknown;  // from module_class
  // vLLM's verdict under another compressed-tensors format where it differs from `quantized`
  // (the base format's): format ("float-quantized") -> quantized under it (the map's
  // scheme_verdicts). Empty when every format agrees.
  std::map<std::string, bool, std::less<>> quantized_by_format;

  // Whether it loads quantized weights of `format` (a compressed-tensors format; "" or the
  // base format: `quantized`).
  bool QuantizedUnder(std::string_view format) const {
    auto it = quantized_by_format.find(format);
    return it == quantized_by_format.end() ? quantized : it->second;
  }
};

struct MappedArchitecture {
  std::string name;  // the registry's architecture, e.g. "Qwen3DSparkModel"
  std::string file;  // vLLM's model file, e.g. "vllm/model_executor/models/qwen3_dspark.py"
  bool is_draft = false;
  std::vector<std::string> methods;  // speculative methods that build it ("dspark", "mtp", ...)
  // What vLLM added to the tiny model's layer indices (nullopt: the map does not say), and the tiny
  // target's layer count: equal for a draft numbered after its target's layers; DeepSeek-V4
  // DSpark adds its own config's num_hidden_layers instead (deepseek_v4/nvidia/dspark.py:
  // layers.{num_hidden_layers + i}).
  std::optional<int64_t> layer_offset;
  int64_t tiny_target_layers = 0;
  // vLLM numbers the draft's layers after the target's / as the checkpoint does (offset 0).
  bool layers_follow_target() const { return layer_offset.value_or(0) > 0; }
  bool layers_from_zero() const { return layer_offset == 0; }
  std::string target;  // a draft's: the target architecture the generator built it beside
  // A draft that ships as its own checkpoint and names no registry architecture (Gemma4's
  // assistant, Gemma4AssistantForCausalLM): the config model_types vLLM rewrites to this
  // architecture (speculative.py hf_config_override), by which FindArchitecture finds it.
  std::vector<std::string> checkpoint_model_types;
  // vLLM asks the target's quantization config (vllm_config.quant_config) about the draft's Linears
  // and never reads the draft's own (the map's quant_config_from "target"). For MTP layers that
  // is their own checkpoint's; for a separate draft it is another model's config.
  bool built_under_target_config = false;
  // vLLM refuses to load this architecture from a compressed-tensors checkpoint lacking these
  // parameters (vLLM's names): the KV-cache parameters the quant config registers on an
  // attention layer, which no checkpoint without a kv_cache_scheme stores, and which its
  // load_weights requires (Step3p5MTP's MTP completeness check). Empty when it loads without
  // them. `unstored_refusal` is vLLM's message, the parameter it names written "{param}".
  std::vector<std::string> refuses_without;
  std::string unstored_refusal;
  // Its load_weights takes, for a Linear's stored tensors, only names ending in these parameters
  // ({"weight", "weight_scale_inv"}: LongCat MTP's literal rename dict) and refuses the names a
  // compressed-tensors checkpoint stores (the map's load_weights_takes_only, found by feeding
  // them to it); nullopt when the map records no such limit.
  struct TakesOnly {
    std::vector<std::string> params;
    std::string error;     // vLLM's refusal of a quantized parameter's name
    std::string error_at;  // "file:line" of that refusal, "" when the map could not say
  };
  std::optional<TakesOnly> load_weights_takes_only;
  // Where its load_weights renames a checkpoint's `.weight_packed` to `.weight` ("file:line",
  // and the `if` around it), the map's weight_packed_renamed; empty where it does not. Kimi-K3
  // MTP does so when its routed experts registered no w13_weight_packed (kept dense) and then
  // skips the renamed names: every quantized Linear's weight_packed is dropped without a word.
  std::string weight_packed_renamed_at;
  std::string weight_packed_renamed_guard;
  // vLLM's error when this release's load_weights fails for every checkpoint of the architecture,
  // dense or quantized, whatever names it holds (0.33.0's EagleMistralLarge3ForCausalLM reads an
  // attribute its model never sets); "" when it loads. ReleaseLacksKind treats the release as
  // lacking the architecture.
  std::string load_fails;
  // What the quantization config held when vLLM asked it about the Linear modules (the map's
  // quant_config_packed_modules_mapping): with a packed_modules_mapping, ignore entries naming
  // shards (q_proj) cover the fused module (qkv_proj); without one only the fused name does.
  // Unknown when no Linear was asked.
  enum class PackedMapping { kUnknown, kHeld, kNone };
  PackedMapping quant_config_packed_mapping = PackedMapping::kUnknown;
  // Keyed by NormalizedModuleName of each checkpoint module name vLLM loads into it.
  std::map<std::string, MappedModule> modules;
  // NormalizedModuleName of the parameters vLLM holds outside any module the map lists
  // (embeddings, norms, a Markov head's nn.Embedding): never Linear weights.
  std::set<std::string> plain_params;
  // The model class's packed_modules_mapping: fused leaf -> its shards in order.
  FusedMapping packed_modules_mapping;
  // --speculative-config options that the release's SpeculativeConfig accepts for this draft
  // (the map's serve_options with "accepted": true), each with the values it takes:
  // {"draft_lm_head_quantization", {"fp8", "nvfp4"}} on 0.33 for EAGLE and MTP drafts.
  std::map<std::string, std::vector<std::string>> serve_options;
  // The model class declares a lm_head of its own (has_own_lm_head): vLLM then shares the
  // target's lm_head with it, and so applies draft_lm_head_quantization, only when the two are
  // equal.
  bool has_own_lm_head = false;
  // vLLM refuses to build the architecture under a compressed-tensors format that the base
  // format builds: format -> vLLM's error (the map's scheme_verdicts.<format>.error).
  std::map<std::string, std::string, std::less<>> refused_by_format;

  // The method of a `--speculative-config` ("dspark"), or "" for a target.
  std::string_view method() const;
  // A separate draft (not MTP layers) whose own quantization_config vLLM never reads: its Linears
  // are built under the target's (built_under_target_config).
  bool takes_target_quant_config() const;
};

// A speculators-format config (speculators_model_type, transformer_layer_config) as the release
// reads it (vllm/transformers_utils/configs/speculators): the architecture it builds and the
// --speculative-config it is served with, which the format fixes (peagle: eagle3 with
// parallel_drafting).
struct SpeculatorsFormat {
  // transformer_layer_config's model_type ("" when it has none; "*" for every one) -> the
  // architecture vLLM builds.
  std::map<std::string, std::string> architectures;
  std::string method;  // "" when the generator could not derive it
  // The format's other --speculative-config fields, each as (key, JSON value):
  // {"parallel_drafting", "true"}.
  std::vector<std::pair<std::string, std::string>> fields;
};

// A --speculative-config option of a release (the map's top-level serve_options): what vLLM does
// with a draft's weights at load time, outside the checkpoint.
struct ServeOption {
  std::vector<std::string> values;  // its annotation's Literal: {"fp8", "nvfp4"}
  std::string defined_at;           // "vllm/config/speculative.py:484"
  std::string doc;                  // vLLM's docstring of the field
};

// What the release's WNA16 kernel selection does under VLLM_BATCH_INVARIANT=1 (the map's
// "kernels" -> "wna16_batch_invariant", tools/vllm_module_map/kernel_probe.py): the generator
// builds a 3-bit compressed-tensors Linear, which no stock kernel takes, with and without it.
struct BatchInvariantKernels {
  bool probed = false;  // the map has the section (maps made before it was added do not)
  // With VLLM_BATCH_INVARIANT=1 the Linear loads with no kernel chosen: the release dequantizes
  // and runs its batch-invariant matmul, so no kernel shape rule applies.
  bool loads_without_kernel = false;
  // The file:line that skips kernel selection (when it loads), else vLLM's error with the
  // variable set.
  std::string evidence;
  std::string refused;  // vLLM's error for that Linear without the variable
};

// A compressed-tensors format the generator built every architecture under (the map's "schemes").
struct SchemeBuild {
  bool base = false;     // the format of the map's "modules" (pack-quantized, W4A16)
  std::string platform;  // where: "CUDA capability 90" (FP8/FP4 kernels choose by capability)
};

struct ModuleMap {
  std::string release;  // "0.33.0"
  VllmVersion version;  // release, parsed
  // No map of this release: a release older than every map, judged by an empty map that knows no
  // architecture (ChooseModuleMap), so the unknown-architecture rules of map_rules.h apply.
  bool stand_in = false;
  std::map<std::string, MappedArchitecture> architectures;  // those the generator could build
  std::map<std::string, std::string> not_built;             // architecture -> why not
  std::map<std::string, SpeculatorsFormat> speculators;     // by speculators_model_type
  // The prefix a method="draft_model" draft's modules carry in vLLM ("draft_model.": its proposer
  // builds the model with get_model(prefix="draft_model")), so that vLLM matches config_groups
  // targets and ignore entries against "draft_model.model.layers.0.mlp.down_proj". Empty when the
  // map records none (the targets' as_draft_model module_prefix).
  std::string draft_model_prefix;
  std::map<std::string, ServeOption> serve_options;  // by option name; none before 0.33
  BatchInvariantKernels batch_invariant;
  // Every format the map's verdicts cover, the base one included; a format not listed (none
  // today) is judged by the base verdict.
  std::map<std::string, SchemeBuild, std::less<>> schemes;

  // Serving with VLLM_BATCH_INVARIANT=1, a compressed-tensors WNA16 Linear loads without kernel
  // selection on this release (its kernel shape rules do not apply).
  bool wna16_batch_invariant_needs_no_kernel() const {
    return batch_invariant.loads_without_kernel;
  }
};

// The maps, oldest release first.
const std::vector<ModuleMap>& ModuleMaps();

// A map as tools/vllm_module_map/generate.py --print writes it (the compiled-in ones, a user's
// file, or one `check --vllm DIR` built from that tree). Its release is its "vllm_version", as that
// vLLM reports it ("0.34.1.dev3+g1a2b"). InvalidInput naming `origin` and the field's JSON path
// when the text is not JSON, its "schema_version" is not kModuleMapSchemaVersion, or a field this
// reader reads is missing where required or of another type ("M.json:
// architectures.DFlashDraftModel.modules: expected an object, got a string"); a field the generator
// writes as null where it could not say is read as absent. (vllm_module_map_parse.cc)
Result<ModuleMap> ParseModuleMap(std::string_view json, std::string_view origin);

// The release every command judges for when none is given (quantize, inspect, check, card, the
// Python API): the newest compiled-in map's. kDefaultVllmReleaseReason is how reports say so.
std::string DefaultVllmRelease();
inline constexpr std::string_view kDefaultVllmReleaseReason =
    "the newest module map; --vllm-version V for another";

// The map to judge `release` by (any text ParseVllmVersion reads: "0.32.0+cpu", "v0.33.0", a
// pre-release by its release's map): its own, else the newest older one or, for a release newer
// than every map, the newest map; "" means the newest (DefaultVllmRelease). `warning` says when the
// map is another release's ("not verified for vLLM 0.34.0; judged by the map of 0.33.0"). A release
// older than every map gets a stand-in map that knows no architecture (ModuleMap::stand_in), with
// a warning: it is judged as an unknown architecture is.
struct MapChoice {
  const ModuleMap* map = nullptr;
  std::string warning;
};
Result<MapChoice> ChooseModuleMap(std::string_view release);

// A kind of draft (an architecture, or a speculators format) that `map`'s release lacks while
// another compiled-in map's release has it, or an architecture whose load_weights fails for every
// checkpoint in `map`'s release (MappedArchitecture::load_fails): vLLM of that release refuses
// the checkpoint.
struct LackedKind {
  std::string architecture;     // what vLLM would build: "PeagleLlamaForCausalLM"
  std::string when;             // "removed after 0.33.0" or "first appears in 0.35.0"
  std::string serving_release;  // the nearest release that has it: "0.33.0"; "" when none
  // "vLLM 0.34.0 does not build PeagleLlamaForCausalLM (removed after 0.33.0): serve it on 0.33.0,
  // or check/quantize with --vllm-version 0.33.0"
  std::string message;
};
// config.json's kind: its speculators format (the architecture the nearest release with the format
// builds for it), else, where `map` knows neither its architecture nor its MTP layers, its first
// architecture (built or not), else the architecture or MTP layers `map` knows and cannot load.
// nullopt when the release has it (and loads it), no release does, or `map` is a stand-in.
std::optional<LackedKind> ReleaseLacksKind(const ModuleMap& map, const ModelConfig& config);

// The architecture of `config` in `map` (config.json's architectures, the one vLLM builds for a
// speculators-format config, or a separate draft's by its model_type: checkpoint_model_types), or
// nullptr when the map does not know it.
const MappedArchitecture* FindArchitecture(const ModuleMap& map, const ModelConfig& config);

// The speculators format of a speculators-format `config` in `map`, or nullptr (not such a
// config, or a format this release does not register: vLLM refuses to load it).
const SpeculatorsFormat* FindSpeculatorsFormat(const ModuleMap& map, const ModelConfig& config);

// The architecture a speculators-format `config` builds under `format` (by its
// transformer_layer_config's model_type), or "" when the format refuses that model_type.
std::string_view SpeculatorsArchitecture(const SpeculatorsFormat& format,
                                         const ModelConfig& config);

// The MTP draft architecture vLLM builds for the MTP layers of a model of `config`'s
// architecture (speculative.py rewrites MiMoForCausalLM to MiMoMTPModel, ...), or nullptr.
const MappedArchitecture* FindMtpArchitecture(const ModuleMap& map, const ModelConfig& config);

// The module a checkpoint module (a tensor name without ".weight") loads into: the map's module of
// that name or, for a part of one (an expert of a MoE layer), of the nearest name above it; nullptr
// when none.
const MappedModule* FindModule(const MappedArchitecture& arch, std::string_view checkpoint_module);
bool IsPlainParam(const MappedArchitecture& arch, std::string_view tensor_name);

// A checkpoint or vLLM name with the parts that vary between models taken out, so that a tiny
// model's names match a real one's: no leading "model.", every all-digit component (layer and
// expert indices) as "#", EAGLE-3's "midlayer." as "layers.#.".
std::string NormalizedModuleName(std::string_view name);

}  // namespace spk
