// Pre-quantized sources, decoded on the fly: a source whose config.json carries a
// quantization_config of a format listed here is read as the dense checkpoint its producer's
// loader dequantizes it to, so that `quantize` can requantize it in the same streaming pipeline.
//
// Formats (one row each in kSourceFormats, source_decode.cc; one file each, source_formats.h):
//   compressed-tensors (quant_method "compressed-tensors", every scheme-table format): each
//   quantized module's stored tensors become its `.weight`, decoded by QuantizedModuleReader
//   (source/module_reader.h: compressed-tensors' decompress, into the dtype it returns);
//   the scale, zero-point, shape and global-scale tensors are consumed.
//   fp8 (transformers' FineGrainedFP8 / DeepSeek-V3, Kimi K2: quant_method "fp8",
//   weight_block_size [128, 128]): each F8_E4M3 `X.weight` times its `X.weight_scale_inv` (one
//   F32 scale per block of weight_block_size, the grid rounded up), computed in F32 and rounded
//   to BF16, as transformers' Fp8Dequantize does for a BF16 model; the scales are consumed and
//   are not tensors of the decoded checkpoint.
//   mxfp8 (MiniMax-M3 and its DSpark draft: quant_method "mxfp8" with ignored_layers, as vLLM's
//   ModelOptMxFp8Config reads it): each F8_E4M3 `X.weight` times 2^(e - 127) for the U8 (or
//   F8_E8M0) E8M0 exponent e of its `X.weight_scale_inv` [rows, cols / 32], one per 32 inputs,
//   in F32 and rounded to BF16, as vLLM's dequant_mxfp8_to_bf16; the scales are consumed.
//   ModelOpt's own form of MXFP8 (quant_algo) and MiniMax-M3's NVFP4 routed experts
//   (moe_quant_algo) are refused.
//   gptq (AutoGPTQ, GPTQModel: int2/4/8 `X.qweight` packed along the inputs, `X.qzeros`,
//   `X.scales`, `X.g_idx`; v1 and v2 zeros) and awq (AutoAWQ version gemm: int4 packed along the
//   outputs in AWQ's order): each module's `X.weight` [out, in] = (q - z) * s in F32, rounded
//   once to the scales' dtype (F16), as GPTQModel's dequantizer and AutoAWQ's dequantize_gemm
//   write it; the packed tensors are consumed (source_gptq.cc).
//   modelopt (NVIDIA ModelOpt's Hugging Face export, quant_algo NVFP4, W4A16_NVFP4, FP8 or
//   FP8_PER_CHANNEL_PER_TOKEN, or MIXED_PRECISION of those): each U8 (NVFP4) or F8_E4M3 (FP8)
//   `X.weight` decoded with its `X.weight_scale` (and NVFP4's `X.weight_scale_2`) as ModelOpt's
//   NVFP4QTensor and FP8QTensor dequantize, into the config's torch_dtype (source_modelopt.cc); the
//   scales and the activation/KV-cache scales (`input_scale`, `k_scale`, `v_scale`) are consumed. A
//   source whose config.json has no quantization_config but whose folder has ModelOpt's
//   hf_quant_config.json (ModelOpt up to 0.29) is read with that file as its quantization config,
//   as vLLM does.
//   Side files: a source whose config.json has no quantization_config is read with the first side
//   file it has (kQuantizationSideFiles, source/source.h) in its place: ModelOpt's
//   hf_quant_config.json as it is, AutoGPTQ's / GPTQModel's quantize_config.json and AutoAWQ's
//   quant_config.json translated to the quantization_config they stand for
//   (SideFileQuantizationConfig), so that such a checkpoint decodes exactly as it would with that
//   quantization_config in config.json.
//
// Ownership: the decode records point into the shard readers of the SourceCheckpoint they
// describe, which must outlive them (a move keeps the readers where they are). Thread safety:
// ReadSourceRows and ConsumeSourceRows may be called from several threads at once. Errors:
// InvalidInput naming the folder, file and tensor for a format not listed (with what to do), a
// weight without its scale, a scale of the wrong dtype or shape, and a non-finite scale (found as
// its rows are read); read errors as the safetensors reader returns them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "safetensors/checkpoint_writer.h"
#include "source/source.h"

namespace spk {

// The dense rows of one decoded tensor of a pre-quantized source. Implementations read through
// the shard readers of the SourceCheckpoint passed to ReadRows (the one they were made for) and
// must be callable from several threads at once.
class SourceTensorDecoder {
 public:
  virtual ~SourceTensorDecoder() = default;
  // Rows [r0, r0 + n) of tensor `t` (its TensorMeta, in its decoded dtype) into `out`, which
  // holds exactly n rows.
  virtual Status ReadRows(const SourceCheckpoint& src, const TensorMeta& t, int64_t r0, int64_t n,
                          std::span<uint8_t> out) const = 0;
};

// config.json's quantization_config.quant_method ("compressed-tensors", "fp8", ...; "modelopt"
// for a config without one whose producer is ModelOpt), or "" when there is none.
std::string SourceQuantMethod(const ModelConfig& config);

// The quantization_config side file `file` (one of kQuantizationSideFiles) of folder `dir`, whose
// text is `text`, stands for: hf_quant_config.json as it is; quantize_config.json and
// quant_config.json with quant_method set (absent: gptq in quantize_config.json unless AutoAWQ's
// keys are there, awq in quant_config.json), AutoAWQ's w_bit and q_group_size as bits and
// group_size, version lower-cased, AutoGPTQ's is_marlin_format false dropped, every other key kept.
// Errors (InvalidInput naming "<dir>/<file>" and the key): not JSON or not an object, a
// quant_method other than gptq or awq, is_marlin_format true, no bits (and for awq no group_size),
// and a synonym that disagrees with its transformers name.
Result<nlohmann::ordered_json> SideFileQuantizationConfig(std::string_view dir,
                                                          std::string_view file,
                                                          std::string_view text);

// Pairs every quantized weight of `src` with its scales and presents it in the dtype it decodes
// to (TensorMeta::dtype), dropping the scale tensors from `src`'s lists; records what the source
// was (SourceCheckpoint::decoded_from, decoded_from_file). A source without a quantization_config
// (nor a side file) is left as it is, unless it holds a quantized checkpoint's tensors (refused).
Status DecodeQuantizedSource(SourceCheckpoint* src);

// The dense checkpoint `quantize` reads from `spec` (a folder or a cache id), opened in the one
// order every reader of it keeps: the folder (OpenSourceCheckpoint), fused 3-D experts split as
// model_free_ptq splits them (ExpandFusedExperts), then a pre-quantized source's weights decoded
// (DecodeQuantizedSource, which pairs the split experts' names with their scales). quantize and
// compare's source side open it here; dequantize, which keeps the stored layout, does not split.
Result<SourceCheckpoint> OpenDenseSource(FileSystem* fs, const std::string& spec);

// Rows [r0, r0 + n) of 2-D tensor `i` of `src` in its TensorMeta::dtype, decoded when the source
// stores it quantized; `out` holds exactly n rows.
Status ReadSourceRows(const SourceCheckpoint& src, size_t i, int64_t r0, int64_t n,
                      std::span<uint8_t> out);

// Runs `consume` on the same rows: straight from the shard's mapping (RandomAccessFile::View, no
// copy) when `src` stores the tensor as it is read, from a buffer they were decoded into
// otherwise. A shard truncated while `consume` reads it is an IoError naming the file and the
// tensor (whatever `consume` computed from the rows is then to be dropped). `consume` must not
// keep the span beyond its return; the rows start at an 8-byte aligned address.
Status ConsumeSourceRows(const SourceCheckpoint& src, size_t i, int64_t r0, int64_t n,
                         const std::function<Status(std::span<const uint8_t>)>& consume);

// The producer that writes tensor `i` of `src` as it is read: a copy of its bytes, or its decoded
// rows.
TensorProducer SourceTensorProducer(const SourceCheckpoint& src, size_t i);

}  // namespace spk
