// Opening a Hugging Face model folder for reading: resolves a folder path or an "org/name" repo id
// in the local Hugging Face cache (no network), opens its safetensors shards, parses config.json
// and lists the tensors in shard order then data order.
//
// Every file is read through the FileSystem passed in, which must outlive the SourceCheckpoint.
// Ownership: a SourceCheckpoint owns its open shard readers; it is movable, not copyable.
// Thread safety: reads through `files` are thread-safe. Errors: NotFound for a missing folder,
// config.json or repo id; InvalidInput for malformed files (the message names the file).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "io/file.h"
#include "model/model_config.h"
#include "model/tensor_meta.h"
#include "safetensors/checkpoint_files.h"

namespace spk {

// A folder path as is; "org/name" (when no such folder exists) as
// $HF_HUB_CACHE or $HF_HOME/hub or ~/.cache/huggingface/hub / models--org--name / snapshots /
// <ref>, where <ref> comes from refs/main, or is the only snapshot. A Mistral-format folder
// (params.json and no config.json; Mistral Large 4 and its embedded DSpark draft are read by vLLM
// from this format only) is InvalidInput naming params.json and saying what to do: every command
// resolves its folders here, so each refuses it the same way.
Result<std::string> ResolveModelPath(FileSystem* fs, const std::string& spec);

// ModelOpt's file beside config.json that describes its quantization (SourceCheckpoint).
inline constexpr std::string_view kHfQuantConfigFile = "hf_quant_config.json";
// The files beside config.json that describe a quantized export when config.json has no
// quantization_config, in the order they are looked for: ModelOpt's (up to 0.29), AutoGPTQ's and
// GPTQModel's quantize_config.json, then AutoAWQ's quant_config.json (GPTQModel's order,
// QuantizeConfig.from_pretrained). None of them is copied into an output
// (source/other_files.h).
inline constexpr std::array<std::string_view, 3> kQuantizationSideFiles = {
    kHfQuantConfigFile, "quantize_config.json", "quant_config.json"};

class SourceTensorDecoder;  // source/source_decode.h

// How one tensor of a pre-quantized source is decoded (source/source_decode.h): a decoder of
// its source format (source/source_formats.h), or none for a tensor stored dense.
struct SourceDecode {
  std::shared_ptr<const SourceTensorDecoder> decoder;
  bool decoded() const { return decoder != nullptr; }
};

struct SourceCheckpoint {
  std::string dir;
  SafetensorsCheckpoint files;
  ModelConfig config;
  std::vector<TensorMeta> tensors;   // every tensor, shard by shard, in data order
  std::vector<size_t> tensor_shard;  // parallel to tensors: index of the shard holding it
  // Parallel to tensors: the bytes to read for it in its shard (the header's entry, or after
  // ExpandFusedExperts a slice of a fused 3-D expert tensor).
  std::vector<TensorEntry> entries;
  // Parallel to tensors after DecodeQuantizedSource decoded a pre-quantized source, else empty.
  std::vector<SourceDecode> decode;
  std::string decoded_from;  // the source's quantization_config (JSON text), when decoded
  // The file decoded_from is read from: "config.json" (its quantization_config), or the side file
  // (side_config_file) of an export that describes its quantization there only.
  std::string decoded_from_file;
  // When config.json has no quantization_config: the first of kQuantizationSideFiles the folder
  // holds (its name, and its text), else both empty. ModelOpt up to 0.29 describes its export in
  // hf_quant_config.json only (vLLM reads it in config.json's place); AutoGPTQ and older AutoAWQ
  // in quantize_config.json and quant_config.json only (GPTQModel and AutoAWQ load them).
  std::string side_config_file;
  std::string side_config;
};

Result<SourceCheckpoint> OpenSourceCheckpoint(FileSystem* fs, const std::string& spec);

// Replaces every fused 3-D expert tensor by the per-expert 2-D weights model_free_ptq splits it
// into (model/moe.h SplitFusedExperts), in its place and shard; each slice reads its rows of
// the fused tensor and records the fused tensor's name in TensorMeta::split_from. A quantized fused
// tensor (`X` 3-D beside `X_weight_scale`: ModelOpt's Llama4 and gpt-oss experts) is refused,
// InvalidInput naming its file and name.
Status ExpandFusedExperts(SourceCheckpoint* src);

// The index in `src`'s lists of tensor `name` (after ExpandFusedExperts, also a split expert;
// after DecodeQuantizedSource, a decoded weight), or nullopt. Linear scan.
std::optional<size_t> FindSourceTensor(const SourceCheckpoint& src, std::string_view name);

}  // namespace spk
