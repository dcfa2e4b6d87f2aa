// The finding codes of `sparkulator check`: one table, one row per code, with the code (a stable
// API: kebab-case, never renamed; scripts and tests match on it), the severities it is raised at,
// one line of doc, and the rules that raise it (by name, rows of check/check_rules.h's table: the
// one place that says which rule raises which code; a rule raising a code its row does not name is
// a programming error, asserted by the FindingSink and tested by finding_codes_test.cc).
// docs/check.md's list of codes is generated from the table (FindingCodesMarkdown; the ctest
// `finding_codes_doc` fails when the doc differs).
//
// Every finding names its row: a checker writes `Add(FindingCode::kMissingWeightScale, ...)`, so an
// unknown code cannot be written. A code whose row has one severity converts to FixedCode, which
// the compiler refuses for a row of several (consteval); a code of several severities, or one read
// from a rule table (vllm_rules.h), goes with its severity to MakeFinding(code, severity, ...).
//
// The table owns its rows (constexpr, static storage); values and pure functions, thread-safe.
// Errors: none at run time; a severity outside the row's set is a programming error (assert).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "check/findings.h"

namespace spk {

enum class FindingCode : uint8_t {
  kIgnoreMatchesNothing,
  kTargetMatchesNothing,
  kVllmExpectsQuantized,
  kVllmExpectsDense,
  kWeightAndPacked,
  kMissingWeightScale,
  kMissingWeightShape,
  kMissingWeightPacked,
  kMissingZeroPoint,
  kWeightPackedShape,
  kWeightPackedLegacyLayout,
  kWeightScaleShape,
  kWeightShapeInvalid,
  kZeroPointShape,
  kZeroPointInSymmetric,
  kScaleNotFinite,
  kScaleZero,
  kScaleNegative,
  kGroupDoesNotDivide,
  kFusedShardsDisagree,
  kIgnoreNeedsFusedMapping,
  kQuantizedEmbedding,
  kQuantizedLmHead,
  kQuantizedNonLinear,
  kQuantizedRouter,
  kQuantizedEmbeddedDraft,
  kDflashQkvQuantized,
  kLagunaUnfusedQkv,
  kEagle3AuxLayersDefault,
  kFamilyKeepsDense,
  kKernelRule,
  kKernelRulePlatform,
  kGroupSizeUnsupported,
  kUnknownScheme,
  kNoVllmKernel,
  kLayoutLoadsNowhere,
  kVllmBatchInvariantNoKernel,
  kUnknownFormat,
  kFormatNotChecked,
  kMissingQuantTensor,
  kQuantTensorShape,
  kUnexpectedQuantTensor,
  kGlobalScaleInvalid,
  kGlobalScaleDiffers,
  kQuantArgsKey,
  kQuantConfigInvalid,
  kQuantMethodNotChecked,
  kNotWeightOnly,
  kAsymInt8NoMarlin,
  kTargetInvalidRegex,
  kIgnoreInvalidRegex,
  kShardNotInIndex,
  kIndexFileMissing,
  kIndexTensorMissing,
  kIndexInvalid,
  kTensorNotInIndex,
  kIndexWrongShard,
  kIndexMissing,
  kSafetensorsInvalid,
  kSafetensorsMetadataFormat,
  kDuplicateTensor,
  kConfigMissing,
  kConfigInvalid,
  kNoSafetensors,
  kDraftOffsetUnknown,
  kVllmMapNoScheme,
  kVllmMapSchemeNotBuilt,
  kVllmMapPlainParam,
  kVllmMapWeightReadDirectly,
  kVllmMapDraftTakesTargetConfig,
  kVllmMapModuleUnknown,
  kVllmMapArchitectureUnknown,
  kVllmReleaseLacksArchitecture,
  kVllmReleaseNotMapped,
  kVllmMapNotBuilt,
  kVllmSpeculatorsFormatUnknown,
  kParallelDraftingFcCpu,
  kMtpLayerLowBits,
  kVllmRefusesUnstoredParams,
  kVllmLoadWeightsDenseOnly,
  kTargetHiddenSize,
  kTargetVocabSize,
  kTargetLayerCount,
  kTargetLayerIds,
  kTargetPrecisionMismatch,
  kVllmDflashContextKv,
  kVllmLagunaGetCacheScale,
  kCount,  // not a code: the number of rows
};

// The severities a code is raised at, one bit per Severity.
constexpr uint8_t SeverityBit(Severity s) { return uint8_t{1} << static_cast<int>(s); }
inline constexpr uint8_t kErr = SeverityBit(Severity::kError);
inline constexpr uint8_t kWarn = SeverityBit(Severity::kWarning);
inline constexpr uint8_t kInfo = SeverityBit(Severity::kInfo);

struct FindingCodeRow {
  FindingCode id;
  std::string_view code;       // kebab-case, the Finding's `code`
  uint8_t severities;          // kErr | kWarn | kInfo; more than one: the doc says when which
  std::string_view raised_by;  // the rules that raise it: "rule" or "rule-a, rule-b"
  std::string_view doc;        // markdown, one line
};

// Rows in the order of FindingCode (checked below) and of docs/check.md.
inline constexpr std::array<FindingCodeRow, static_cast<size_t>(FindingCode::kCount)> kFindingCodes{
    {
        {FindingCode::kIgnoreMatchesNothing, "ignore-matches-nothing", kErr | kWarn,
         "ignore-entries",
         "an ignore entry matches no vLLM module name. Error when it matches a checkpoint name "
         "(the "
         "silent miss: `layers.0.self_attn.q_proj` instead of "
         "`model.layers.8.self_attn.qkv_proj`); the "
         "fix gives vLLM's name"},
        {FindingCode::kTargetMatchesNothing, "target-matches-nothing", kErr | kWarn,
         "targets-match",
         "a `config_groups` target (other than a class such as `Linear`) matches no vLLM module "
         "name. Error when it matches a checkpoint name: a mixed-precision checkpoint served as a "
         "`draft_model` draft, whose modules vLLM names `draft_model.model.layers.N...` "
         "(vllm#49893), or a draft whose layers vLLM renumbers; the fix gives a `re:(.*\\.)?` "
         "pattern"},
        {FindingCode::kVllmExpectsQuantized, "vllm-expects-quantized", kErr, "quantized-or-dense",
         "a config group targets the module and nothing ignores it, but the checkpoint holds "
         "`.weight` "
         "(KeyError at load)"},
        {FindingCode::kVllmExpectsDense, "vllm-expects-dense", kErr, "quantized-or-dense",
         "the module is stored quantized but is ignored / untargeted / there is no "
         "quantization_config"},
        {FindingCode::kWeightAndPacked, "weight-and-packed", kErr, "weight-and-packed",
         "both `.weight` and `.weight_packed` stored"},
        {FindingCode::kMissingWeightScale, "missing-weight-scale", kErr, "module-tensors",
         "no `weight_scale`: vLLM does not notice and runs on uninitialised memory"},
        {FindingCode::kMissingWeightShape, "missing-weight-shape", kErr, "module-tensors",
         "pack-quantized: no `weight_shape`, so vLLM cannot unpack the weight"},
        {FindingCode::kMissingWeightPacked, "missing-weight-packed", kErr, "module-weights",
         "quantization tensors (`weight_scale`, `weight_shape`, `weight_zero_point`) without "
         "`weight_packed` or `weight`: the module has no weights"},
        {FindingCode::kMissingZeroPoint, "missing-zero-point", kErr, "module-tensors",
         "an asymmetric scheme without `weight_zero_point`: vLLM dequantizes with an "
         "uninitialised zero point"},
        {FindingCode::kWeightPackedShape, "weight-packed-shape", kErr, "module-tensors",
         "`weight_packed`'s dtype or shape differs from docs/formats.md section 2"},
        {FindingCode::kWeightPackedLegacyLayout, "weight-packed-legacy-layout", kErr,
         "module-tensors",
         "a 3/5/6/7-bit `weight_packed` holds whole values per int32 word (the layout of "
         "compressed-tensors before 0.17, `ceil(in / floor(32 / bits))` words a row); vLLM reads "
         "them packed across words (`ceil(in * bits / 32)`) and its weight loader fails an "
         "assertion (`param_data.shape == loaded_weight.shape`, model_executor/parameter.py; "
         "reported as vllm#49893 for a `draft_model` draft, and the same for a plain model)"},
        {FindingCode::kWeightScaleShape, "weight-scale-shape", kErr, "module-tensors",
         "`weight_scale`'s dtype or shape differs from docs/formats.md section 2"},
        {FindingCode::kWeightShapeInvalid, "weight-shape-invalid", kErr, "module-tensors",
         "`weight_shape` is not I64 `[2]` (docs/formats.md section 2)"},
        {FindingCode::kZeroPointShape, "zero-point-shape", kErr, "module-tensors",
         "`weight_zero_point`'s dtype or shape differs from docs/formats.md section 2"},
        {FindingCode::kZeroPointInSymmetric, "zero-point-in-symmetric", kErr, "module-tensors",
         "`weight_zero_point` in a symmetric scheme (vLLM has no parameter for it)"},
        {FindingCode::kScaleNotFinite, "scale-not-finite", kErr, "module-tensors",
         "NaN or Inf `weight_scale` values (counted); E4M3 scales decode as FP8 (0x7F is NaN), "
         "E8M0 "
         "bytes as `2^(e-127)` with 255 NaN"},
        {FindingCode::kScaleZero, "scale-zero", kErr, "module-tensors",
         "zero `weight_scale` values (counted)"},
        {FindingCode::kScaleNegative, "scale-negative", kErr, "module-tensors",
         "negative `weight_scale` values (counted)"},
        {FindingCode::kGroupDoesNotDivide, "group-does-not-divide", kErr, "module-tensors",
         "`in_features % group_size != 0`"},
        {FindingCode::kFusedShardsDisagree, "fused-shards-disagree", kErr,
         "ignore-splits-fused, fused-agreement",
         "q/k/v or gate/up: some quantized and some dense, scale dtypes differ, or the ignore list "
         "splits them"},
        {FindingCode::kIgnoreNeedsFusedMapping, "ignore-needs-fused-mapping", kErr,
         "draft-fused-mapping",
         "drafts: vLLM compares the fused name and the ignore list names only the shards, as the "
         "module map saw vLLM build the draft (its quant config held no `packed_modules_mapping`; "
         "without a map entry, rule draft-quant-config-no-fused-mapping); on unverified releases, "
         "the decision differs with and without the mapping"},
        {FindingCode::kQuantizedEmbedding, "quantized-embedding", kErr, "not-a-linear",
         "packed tensors for an embedding, which vLLM never builds as a Linear"},
        {FindingCode::kQuantizedLmHead, "quantized-lm-head", kErr, "not-a-linear",
         "packed tensors for the `lm_head`, which vLLM never builds as a quantized Linear"},
        {FindingCode::kQuantizedNonLinear, "quantized-non-linear", kErr, "not-a-linear",
         "packed tensors for another module vLLM never builds as a Linear (a norm, a non-2-D or "
         "non-float tensor)"},
        {FindingCode::kQuantizedRouter, "quantized-router", kErr, "quantized-router",
         "a packed MoE router or gate that vLLM builds with `quant_config=None` (Laguna, Mixtral, "
         "DeepSeek, gpt-oss `GateLinear`, Qwen2/3-MoE `shared_expert_gate`; docs/moe.md): it has "
         "only "
         "a dense `.weight`"},
        {FindingCode::kQuantizedEmbeddedDraft, "quantized-embedded-draft", kErr,
         "embedded-draft-dense",
         "a packed Linear of a draft embedded in its target's checkpoint that vLLM builds with "
         "`quantization_config` None (Mistral Large 4's DSpark draft, `mtp_dspark.*`, vLLM 0.34): "
         "its `load_weights` knows only a BF16 `.weight` and fails"},
        {FindingCode::kDflashQkvQuantized, "dflash-qkv-quantized", kErr | kWarn | kInfo,
         "vllm-release-drafts",
         "a DFlash draft with quantized q/k/v, by vLLM version and model (table above): error "
         "where "
         "vLLM fails, warning where the release is not verified, info where it loads"},
        {FindingCode::kLagunaUnfusedQkv, "laguna-unfused-qkv", kErr | kWarn, "vllm-release-drafts",
         "a Laguna DFlash draft storing `q_proj/k_proj/v_proj` instead of `qkv_proj`, dense or "
         "not; a "
         "warning only where the release is not verified"},
        {FindingCode::kEagle3AuxLayersDefault, "eagle3-aux-layers-default", kErr | kWarn,
         "vllm-release-drafts",
         "an EAGLE-3 head without aux layer ids whose vLLM default layers do not feed `fc` (table "
         "above): error when the target's layer count gives the wrong count, warning when the "
         "count "
         "or the release's default is unknown"},
        {FindingCode::kFamilyKeepsDense, "family-keeps-dense", kErr, "family-keeps-dense",
         "other family rules (Laguna `g_proj`, MTP `eh_proj`)"},
        {FindingCode::kKernelRule, "kernel-rule", kErr, "pack-quantized-kernels, format-kernels",
         "pack-quantized W4A16/W8A16: no kernel of the vLLM release judged takes the shape at "
         "`--tp N` "
         "on any platform (section \"Pack-quantized kernel rules\"); for FP8 blocks and W4AFP8, "
         "vLLM's "
         "rules (below)"},
        {FindingCode::kKernelRulePlatform, "kernel-rule-platform", kWarn, "pack-quantized-kernels",
         "pack-quantized W4A16/W8A16, vLLM 0.32+: one platform loads the module and the other "
         "refuses "
         "it (CUDA pads Marlin's tiles, the CPU build needs multiples of 32); names the platform "
         "and "
         "quotes vLLM's message"},
        {FindingCode::kGroupSizeUnsupported, "group-size-unsupported", kErr, "quantization-config",
         "group size other than 32, 64, 128 (or channel-wise); reported once for its config group, "
         "and "
         "the shapes it would imply (`group-does-not-divide`, `weight-scale-shape`, "
         "`zero-point-shape`, `kernel-rule`) are then not reported module by module"},
        {FindingCode::kUnknownScheme, "unknown-scheme", kErr, "quantization-config",
         "not an integer 2..8-bit group/channel weight scheme, nor a format of the scheme "
         "registry"},
        {FindingCode::kNoVllmKernel, "no-vllm-kernel", kErr, "quantization-config",
         "2/3/5/6/7-bit pack-quantized weights: vLLM 0.32 has no kernel for them on the CPU "
         "(`ValueError: Failed to find a kernel that can implement the WNA16 linear layer`, `Quant "
         "type (uint3b4) not supported by CPUWNA16`) and on CUDA only `HummingLinearKernel` with "
         "the "
         "optional `humming` package (docs/formats.md 2.3)"},
        {FindingCode::kLayoutLoadsNowhere, "layout-loads-nowhere", kErr, "quantization-config",
         "the checkpoint's scheme is stored in a layout no vLLM release loads: W4AFP8 as "
         "model_free_ptq writes it (int-quantized, int4 in an I8 `weight`), which Hopper's "
         "CompressedTensorsW4A8Fp8 reads as pack-quantized `weight_packed` only and vLLM's CPU "
         "build has no scheme for; quantize refuses it without --allow-unloadable"},
        {FindingCode::kVllmBatchInvariantNoKernel, "vllm-batch-invariant-no-kernel", kInfo,
         "quantization-config, pack-quantized-kernels",
         "`--vllm-batch-invariant` (served with `VLLM_BATCH_INVARIANT=1`) on a release whose "
         "module map says a compressed-tensors WNA16 Linear then loads without kernel selection "
         "(0.33: compressed_tensors_wNa16.py skips choose_mp_linear_kernel): in place of "
         "`no-vllm-kernel`, `kernel-rule` or `kernel-rule-platform`, the module loads and runs "
         "vLLM's batch-invariant dequantize + matmul path (slower than a kernel); names the rule "
         "it would have broken"},
        {FindingCode::kUnknownFormat, "unknown-format", kErr, "quantization-config",
         "a format vLLM does not know"},
        {FindingCode::kFormatNotChecked, "format-not-checked", kWarn, "quantization-config",
         "a format vLLM knows that no `--scheme` writes (naive-quantized, marlin-24, sparse, "
         "dense, "
         "mixed-precision), not verified tensor by tensor"},
        {FindingCode::kMissingQuantTensor, "missing-quant-tensor", kErr, "module-tensors",
         "float-, int-, nvfp4-, mxfp4-pack- and mxfp8-quantized: a tensor the format stores is "
         "missing"},
        {FindingCode::kQuantTensorShape, "quant-tensor-shape", kErr, "module-tensors",
         "float-, int-, nvfp4-, mxfp4-pack- and mxfp8-quantized: a tensor has another dtype or "
         "shape "
         "than the codec's"},
        {FindingCode::kUnexpectedQuantTensor, "unexpected-quant-tensor", kErr, "module-tensors",
         "float-, int-, nvfp4-, mxfp4-pack- and mxfp8-quantized: a tensor the format never stores "
         "is "
         "there (a zero point in a symmetric scheme)"},
        {FindingCode::kGlobalScaleInvalid, "global-scale-invalid", kErr, "module-tensors",
         "NVFP4: `weight_global_scale` not finite and positive"},
        {FindingCode::kGlobalScaleDiffers, "global-scale-differs", kErr, "fused-agreement",
         "NVFP4: fused partners (q/k/v, gate/up) with different global scales, in one shard or "
         "across "
         "shards"},
        {FindingCode::kQuantArgsKey, "quant-args-key", kErr | kWarn, "quantization-config",
         "`QuantizationArgs` keys older compressed-tensors releases reject (`scale_dtype`, "
         "`zp_dtype`, "
         "unknown keys). Error when set to a value, warning when null (llm-compressor 0.14 writes "
         "them "
         "as null)"},
        {FindingCode::kQuantConfigInvalid, "quant-config-invalid", kErr, "quantization-config",
         "`quantization_config` does not parse"},
        {FindingCode::kQuantMethodNotChecked, "quant-method-not-checked", kWarn,
         "quantization-config",
         "a `quant_method` other than compressed-tensors: not checked module by module"},
        {FindingCode::kNotWeightOnly, "not-weight-only", kWarn, "quantization-config",
         "a config group quantizes activations too and is no registry row: only weight-only "
         "schemes are checked in full"},
        {FindingCode::kAsymInt8NoMarlin, "asym-int8-no-marlin", kWarn, "quantization-config",
         "asymmetric int8 never runs on Marlin; vLLM falls back to a slower kernel or fails"},
        {FindingCode::kTargetInvalidRegex, "target-invalid-regex", kErr, "quantization-config",
         "a `targets` pattern that does not compile (Python `re`)"},
        {FindingCode::kIgnoreInvalidRegex, "ignore-invalid-regex", kErr, "quantization-config",
         "an `ignore` pattern that does not compile (Python `re`)"},
        {FindingCode::kShardNotInIndex, "shard-not-in-index", kErr | kWarn, "index",
         "a `.safetensors` file the index does not name: vLLM skips it silently (error when "
         "tensors "
         "exist only there)"},
        {FindingCode::kIndexFileMissing, "index-file-missing", kErr, "files",
         "the index names a shard file that does not exist"},
        {FindingCode::kIndexTensorMissing, "index-tensor-missing", kErr, "index",
         "the index names a tensor no shard holds"},
        {FindingCode::kIndexInvalid, "index-invalid", kErr, "files",
         "a malformed `model.safetensors.index.json`"},
        {FindingCode::kTensorNotInIndex, "tensor-not-in-index", kWarn, "index",
         "a tensor the index's `weight_map` does not list (vLLM loads it with its shard; other "
         "loaders may not)"},
        {FindingCode::kIndexWrongShard, "index-wrong-shard", kWarn, "index",
         "the index places a tensor in another shard than the one holding it (vLLM tolerates it)"},
        {FindingCode::kIndexMissing, "index-missing", kWarn, "files",
         "several `.safetensors` files and no index: vLLM loads them all, transformers none"},
        {FindingCode::kSafetensorsInvalid, "safetensors-invalid", kErr, "files, module-tensors",
         "a shard that breaks a rule of docs/formats.md section 1 (checked for every shard, listed "
         "or "
         "not)"},
        {FindingCode::kSafetensorsMetadataFormat, "safetensors-metadata-format", kWarn, "files",
         "`__metadata__` without `\"format\": \"pt\"`"},
        {FindingCode::kDuplicateTensor, "duplicate-tensor", kErr, "files",
         "a tensor in two shards"},
        {FindingCode::kConfigMissing, "config-missing", kErr, "config",
         "no `config.json`: the folder is not a model"},
        {FindingCode::kConfigInvalid, "config-invalid", kErr, "config",
         "`config.json` does not parse"},
        {FindingCode::kNoSafetensors, "no-safetensors", kErr, "files",
         "no `.safetensors` file: the folder is not a model"},
        {FindingCode::kDraftOffsetUnknown, "draft-offset-unknown", kWarn, "draft-offset",
         "the draft's vLLM layer names cannot be known without the target's layer count"},
        {FindingCode::kVllmMapNoScheme, "vllm-map-no-scheme", kErr, "map-modules",
         "a module stored quantized that vLLM's module map of the release judged shows built with "
         "no "
         "quantization scheme (a head under `quant_config=None`, a plain `nn.Linear`, a "
         "`ParallelLMHead`: DSpark's Markov head, XPress's head, DFlash2's candidate selector, "
         "MiMo's "
         "MTP `input_proj`); names the class and vLLM's file"},
        {FindingCode::kVllmMapSchemeNotBuilt, "vllm-map-scheme-not-built", kWarn,
         "map-architecture",
         "vLLM's module map of the release judged could not build the architecture under the "
         "checkpoint's compressed-tensors format on the generator's platform (the map's "
         "`scheme_verdicts` error: 0.32's CPU build has no NVFP4 or MXFP4 Linear kernel), so its "
         "W4A16 verdict judges the modules; quotes vLLM's error and the platform"},
        {FindingCode::kVllmMapPlainParam, "vllm-map-plain-param", kErr, "map-modules",
         "a module stored quantized whose weight vLLM holds as a plain parameter (an "
         "`nn.Embedding` "
         "such as DSpark's `markov_w1`): it loads by name, and nothing is called `weight_packed`"},
        {FindingCode::kVllmMapWeightReadDirectly, "vllm-map-weight-read-directly", kErr,
         "map-modules",
         "a module stored quantized whose `.weight` the model's forward reads (file:line from the "
         "map); a DFlash draft's q/k/v are judged by `dflash-qkv-quantized` instead, which knows "
         "vLLM's guard"},
        {FindingCode::kVllmMapDraftTakesTargetConfig, "vllm-map-draft-takes-target-config",
         kErr | kWarn, "draft-quant-config-owner",
         "vLLM builds this draft's Linears under the target's quantization config and never reads "
         "the "
         "draft's own (the map's `quant_config_from`: Gemma4 DSpark and the EAGLE drafts of "
         "DeepSeek "
         "MTP and MiniCPM, on 0.32 and 0.33): a quantized draft beside an unquantized target (or "
         "no "
         "`--target`) is an error, beside a quantized target a warning (it loads only where the "
         "target's config quantizes the same modules the same way); a dense draft beside a "
         "quantized "
         "target is an error"},
        {FindingCode::kVllmMapModuleUnknown, "vllm-map-module-unknown", kWarn, "map-modules",
         "a module stored quantized that the map's architecture does not list"},
        {FindingCode::kVllmMapArchitectureUnknown, "vllm-map-architecture-unknown", kInfo,
         "map-architecture",
         "no module map knows the architecture: which modules vLLM quantizes is not verified"},
        {FindingCode::kVllmReleaseLacksArchitecture, "vllm-release-lacks-architecture", kErr,
         "map-architecture",
         "the release judged has no such architecture, or no such speculators format, while "
         "another release's map has it (Medusa under 0.33.0: removed after 0.32.0; XPress under "
         "0.32.0: first in 0.33.0), or its load_weights fails for every checkpoint (the map's "
         "`load_fails`: EAGLE Mistral-Large-3 under 0.33.0): vLLM refuses the model; the message "
         "names the release that serves it"},
        {FindingCode::kVllmReleaseNotMapped, "vllm-release-not-mapped", kWarn, "map-release",
         "the release judged has no map of its own: \"not verified for vLLM 0.34.0; judged by the "
         "map "
         "of vLLM 0.33.0\""},
        {FindingCode::kVllmMapNotBuilt, "vllm-map-not-built", kWarn, "module-map",
         "`--vllm DIR`: the module map could not be built from that tree (its Python does not "
         "import vLLM or torch, or the generator failed; the message quotes its stderr): the "
         "compiled-in map of the tree's release judges instead"},
        {FindingCode::kVllmSpeculatorsFormatUnknown, "vllm-speculators-format-unknown", kErr,
         "speculators-format",
         "a speculators-format config (`speculators_model_type`) of a format the release judged "
         "does not register, or whose `transformer_layer_config` model_type it refuses: vLLM stops "
         "with `ValueError: Expected one of: ...` (the map's speculators table)"},
        {FindingCode::kParallelDraftingFcCpu, "parallel-drafting-fc-cpu", kWarn,
         "speculators-format",
         "a parallel-drafting EAGLE-3 draft (speculators `peagle`) with `fc` quantized: loads on "
         "CUDA (Marlin flattens its input) but not on vLLM's CPU build, whose proposer passes the "
         "1-D `mask_hidden` through `fc` at load and whose WNA16 GEMM takes 2-D input only "
         "(`IndexError: Dimension out of range`; measured on 0.32)"},
        {FindingCode::kMtpLayerLowBits, "mtp-layer-low-bits", kWarn, "mtp-layer-bits",
         "Linears of the checkpoint's MTP layers (a layer past `num_hidden_layers`, or under "
         "`mtp.`) are stored at 4 bits or fewer: vLLM loads them, but an int4 MTP head has been "
         "reported to collapse acceptance where int8 keeps it; the fix keeps those layers dense"},
        {FindingCode::kVllmRefusesUnstoredParams, "vllm-refuses-unstored-params", kErr,
         "unstored-params",
         "a compressed-tensors checkpoint whose architecture's load_weights requires the "
         "KV-cache parameters vLLM's attention holds under that config and which no checkpoint "
         "without a `kv_cache_scheme` stores (the map's `refuses_unstored`, found by loading: "
         "Step-3.5's MTP layers on 0.32 and 0.33): vLLM stops with "
         "`RuntimeError: Some parameters like ...attn.k_scale are not in the checkpoint`"},
        {FindingCode::kVllmLoadWeightsDenseOnly, "vllm-load-weights-dense-only", kErr,
         "map-modules",
         "a Linear stored quantized whose architecture's load_weights takes only dense "
         "parameter names for it (the map's `load_weights_takes_only`, found by feeding names to "
         "it: LongCat-Flash MTP's literal rename dict of `.weight` and `.weight_scale_inv` "
         "names, 0.32 to 0.34): vLLM stops with "
         "`KeyError: 'model.mtp.layers.0.eh_proj.weight_packed'`"},
        {FindingCode::kTargetHiddenSize, "target-hidden-size", kErr, "target-pairing",
         "`--target`: the draft's `hidden_size` differs from the target's"},
        {FindingCode::kTargetVocabSize, "target-vocab-size", kErr, "target-pairing",
         "`--target`: the draft's `vocab_size` differs from the target's (they share `lm_head` and "
         "tokenizer)"},
        {FindingCode::kTargetLayerCount, "target-layer-count", kErr, "target-pairing",
         "`--target`: the draft's `num_target_layers` differs from the target's layer count"},
        {FindingCode::kTargetLayerIds, "target-layer-ids", kErr,
         "target-pairing, vllm-release-drafts",
         "`dflash_config.target_layer_ids` or EAGLE-3 aux layer ids beyond the target's layers (an "
         "id "
         "beyond `N` collects nothing)"},
        {FindingCode::kTargetPrecisionMismatch, "target-precision-mismatch", kWarn,
         "target-pairing",
         "`--target`'s weight format (unquantized, int4, fp8, fp4, ...) differs from the one the "
         "draft records (`\"sparkulator\": {\"target_precision\"}`, else unquantized): ~0% "
         "acceptance while the output stays correct"},
        {FindingCode::kVllmDflashContextKv, "vllm-dflash-context-kv", kErr, "vllm-tree-scan",
         "`--vllm DIR`: a DFlash model file reads `qkv_proj.weight` to build the context K/V with "
         "no "
         "`UnquantizedLinearMethod` guard; the fix is a patch (section below)"},
        {FindingCode::kVllmLagunaGetCacheScale, "vllm-laguna-get-cache-scale", kErr,
         "vllm-tree-scan",
         "`--vllm DIR`: `laguna_dflash.py` calls `quant_config.get_cache_scale()`, which only FP8 "
         "configs define; the fix is a patch (section below)"},
    }};

constexpr const FindingCodeRow& RowOf(FindingCode code) {
  return kFindingCodes[static_cast<size_t>(code)];
}
constexpr std::string_view CodeName(FindingCode code) { return RowOf(code).code; }
constexpr bool HasOneSeverity(FindingCode code) {
  const uint8_t s = RowOf(code).severities;
  return s != 0 && (s & (s - 1)) == 0;
}

constexpr bool RowsInEnumOrder() {
  for (size_t i = 0; i < kFindingCodes.size(); ++i) {
    if (static_cast<size_t>(kFindingCodes[i].id) != i) return false;
  }
  return true;
}
static_assert(RowsInEnumOrder(), "kFindingCodes must list the rows in FindingCode order");

// A code whose row has exactly one severity. Converting any other code does not compile.
struct FixedCode {
  consteval FixedCode(FindingCode c) : code(c) {  // NOLINT: implicit on purpose
    if (!HasOneSeverity(c)) throw "this code has several severities: pass one with the code";
  }
  FindingCode code;
  constexpr Severity severity() const {
    const uint8_t s = RowOf(code).severities;
    return s == kErr ? Severity::kError : s == kWarn ? Severity::kWarning : Severity::kInfo;
  }
};

Finding MakeFinding(FixedCode code, std::string module, std::string file, std::string message,
                    std::string fix);
// REQUIRES: `severity` is one of the row's.
Finding MakeFinding(FindingCode code, Severity severity, std::string module, std::string file,
                    std::string message, std::string fix);

// The names of the rules in the row's raised_by ("module-tensors, files" -> both).
std::vector<std::string_view> RulesOf(const FindingCodeRow& row);

// "error / warning": the row's severities in words, most severe first.
std::string SeveritiesInWords(uint8_t severities);

// docs/check.md's list of codes (between <!-- finding-codes:begin --> and <!-- finding-codes:end
// -->), without the markers.
std::string FindingCodesMarkdown();

}  // namespace spk
