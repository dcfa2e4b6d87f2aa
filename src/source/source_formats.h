// The source formats DecodeQuantizedSource reads (source/source_decode.h), one function each,
// and the helpers they share. Internal to source/: only source_decode.cc and the format files
// (source_<format>.cc) include it.
//
// A format's Decode function is handed the opened source and its quantization_config; it pairs each
// quantized weight with what decodes it (SourceDecode), presents the weight in the dtype it decodes
// to, and drops the tensors the decoders consume (KeepSourceTensors). Errors: InvalidInput naming
// the folder, file and tensor (BadSourceTensor); `src` may be left half-decoded on error, so a
// caller stops at the first one.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "source/source.h"

namespace spk {

// One row of the source-format table: the quant_method a quantization_config names, what it is
// (for messages), and its decode.
struct SourceFormat {
  std::string_view quant_method;
  std::string_view description;
  Status (*decode)(SourceCheckpoint* src, const nlohmann::ordered_json& quantization_config);
};

Status DecodeCompressedTensorsSource(SourceCheckpoint* src, const nlohmann::ordered_json& qc);
Status DecodeFp8BlockSource(SourceCheckpoint* src, const nlohmann::ordered_json& qc);
Status DecodeMxfp8Source(SourceCheckpoint* src, const nlohmann::ordered_json& qc);
Status DecodeModeloptSource(SourceCheckpoint* src, const nlohmann::ordered_json& qc);
Status DecodeGptqSource(SourceCheckpoint* src, const nlohmann::ordered_json& qc);
Status DecodeAwqSource(SourceCheckpoint* src, const nlohmann::ordered_json& qc);

// "<dir>/<file>: the model is already quantized (<why>); ..." listing what is decoded, where <file>
// is the one the quantization config was read from (SourceCheckpoint::quantization_config_file).
Status RefuseSource(const SourceCheckpoint& src, std::string_view why);

// "<dir>/<shard file>: tensor '<tensor>': <why>".
Status BadSourceTensor(const SourceCheckpoint& src, size_t shard, std::string_view tensor,
                       const std::string& why);

// A stored tensor a format's decoder reads: the shard that holds it and its entry there.
struct ShardTensor {
  size_t shard = 0;
  TensorEntry entry;
};

// Every E4M3 byte's value (E4M3ToFloat), so that a decode loop is a load and a multiply.
const std::array<float, 256>& E4M3Values();

// A source that declares no quantization (no quantization_config, no side file) but
// holds a tensor only a quantized checkpoint has (.qweight, .weight_packed, .weight_scale, ...):
// InvalidInput naming the file and tensor; Ok otherwise.
Status RefuseUndeclaredQuantization(const SourceCheckpoint& src);

// Replaces `src`'s lists by the tensors `keep` says stay (each with its decode record), in order.
void KeepSourceTensors(SourceCheckpoint* src, const std::vector<bool>& keep,
                       std::vector<SourceDecode> decode);

}  // namespace spk
