#include "source/source_decode.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "quant/float_formats.h"
#include "source/source_formats.h"

namespace spk {
namespace {

// Every source format DecodeQuantizedSource reads, by quantization_config.quant_method.
constexpr std::array kSourceFormats = {
    SourceFormat{"compressed-tensors", "compressed-tensors (every format sparkulator writes)",
                 DecodeCompressedTensorsSource},
    SourceFormat{"fp8", "fp8 (weight_scale_inv blocks: DeepSeek-V3, Kimi K2)",
                 DecodeFp8BlockSource},
    SourceFormat{"mxfp8",
                 "mxfp8 (E8M0 weight_scale_inv per 32 inputs: MiniMax-M3, its DSpark draft)",
                 DecodeMxfp8Source},
    SourceFormat{"gptq", "gptq (int2/4/8, v1 and v2 zeros, any g_idx)", DecodeGptqSource},
    SourceFormat{"awq", "awq (int4, version gemm)", DecodeAwqSource},
    SourceFormat{"modelopt", "modelopt (NVIDIA ModelOpt NVFP4 and FP8)", DecodeModeloptSource},
};

// quant_method, or "modelopt" for a config ModelOpt wrote without one (hf_quant_config.json names
// its producer instead, as vLLM recognizes it), else "".
std::string QuantMethodOf(const nlohmann::ordered_json& qc) {
  if (!qc.is_object()) return "";
  if (auto m = qc.find("quant_method"); m != qc.end() && m->is_string()) {
    return m->get<std::string>();
  }
  // value("name", "") would throw on a name that is not a string: a user's file, read checked.
  auto producer = qc.find("producer");
  if (producer == qc.end() || !producer->is_object()) return "";
  auto name = producer->find("name");
  return name != producer->end() && name->is_string() && *name == "modelopt" ? "modelopt" : "";
}

const SourceFormat* FindSourceFormat(std::string_view method) {
  for (const SourceFormat& f : kSourceFormats) {
    if (f.quant_method == method) return &f;
  }
  return nullptr;
}

}  // namespace

Status RefuseSource(const SourceCheckpoint& src, std::string_view why) {
  std::vector<std::string_view> decodable;
  for (const SourceFormat& f : kSourceFormats) decodable.push_back(f.description);
  return Status::InvalidInput(
      fmt::format("{}/{}: the model is already quantized ({}); sparkulator decodes sources of {} "
                  "only: quantize the original BF16/F16/F32 checkpoint instead",
                  src.dir, src.decoded_from_file.empty() ? "config.json" : src.decoded_from_file,
                  why, fmt::join(decodable, " and ")));
}

const std::array<float, 256>& E4M3Values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = E4M3ToFloat(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

Status BadSourceTensor(const SourceCheckpoint& src, size_t shard, std::string_view tensor,
                       const std::string& why) {
  return Status::InvalidInput(
      fmt::format("{}/{}: tensor '{}': {}", src.dir, src.files.shard_files()[shard], tensor, why));
}

void KeepSourceTensors(SourceCheckpoint* src, const std::vector<bool>& keep,
                       std::vector<SourceDecode> decode) {
  SourceCheckpoint& s = *src;
  size_t out = 0;
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    if (!keep[i]) continue;
    if (out == i) {  // no self-move: a moved-to-itself string may come out empty
      ++out;
      continue;
    }
    s.tensors[out] = std::move(s.tensors[i]);
    s.tensor_shard[out] = s.tensor_shard[i];
    s.entries[out] = std::move(s.entries[i]);
    decode[out] = std::move(decode[i]);
    ++out;
  }
  s.tensors.resize(out);
  s.tensor_shard.resize(out);
  s.entries.resize(out);
  decode.resize(out);
  s.decode = std::move(decode);
}

std::string SourceQuantMethod(const ModelConfig& config) {
  if (!config.has_quantization_config) return "";
  return QuantMethodOf(config.json["quantization_config"]);
}

namespace {

// Names only a quantized checkpoint's tensors have: a source that holds one but declares no
// quantization would otherwise be copied as it is, packed integers and all, and its "quantized"
// output would load as garbage.
constexpr std::array<std::string_view, 7> kQuantizedTensorSuffixes = {
    ".qweight",          ".qzeros",       ".g_idx",         ".weight_packed",
    ".weight_scale_inv", ".weight_scale", ".weight_scale_2"};

}  // namespace

Status RefuseUndeclaredQuantization(const SourceCheckpoint& src) {
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    const std::string& name = src.tensors[i].name;
    for (std::string_view suffix : kQuantizedTensorSuffixes) {
      if (!name.ends_with(suffix)) continue;
      return BadSourceTensor(
          src, src.tensor_shard[i], name,
          "a quantized checkpoint's tensor, but config.json has no quantization_config and the "
          "folder no hf_quant_config.json, quantize_config.json or quant_config.json: add the "
          "quantization_config its producer writes to config.json, or quantize the original "
          "BF16/F16/F32 checkpoint");
    }
  }
  return Status::Ok();
}

Status DecodeQuantizedSource(SourceCheckpoint* src) {
  nlohmann::ordered_json qc;
  if (src->config.has_quantization_config) {
    qc = src->config.json["quantization_config"];
    src->decoded_from_file = "config.json";
  } else if (!src->side_config_file.empty()) {
    src->decoded_from_file = src->side_config_file;
    SPK_ASSIGN_OR_RETURN(
        qc, SideFileQuantizationConfig(src->dir, src->side_config_file, src->side_config));
  } else {
    return RefuseUndeclaredQuantization(*src);
  }
  const std::string method = QuantMethodOf(qc);
  const SourceFormat* format = FindSourceFormat(method);
  if (format == nullptr) {
    std::string why = fmt::format("quant_method {}", method);
    if (method.empty()) {
      why = src->config.has_quantization_config
                ? "a quantization_config without quant_method"
                : fmt::format("{} without a ModelOpt producer", kHfQuantConfigFile);
    }
    return RefuseSource(*src, why);
  }
  SPK_RETURN_IF_ERROR(format->decode(src, qc));
  src->decoded_from = qc.dump();
  return Status::Ok();
}

namespace {

bool IsDecoded(const SourceCheckpoint& src, size_t i) {
  return !src.decode.empty() && src.decode[i].decoded();
}

// Bytes of one row of tensor `t` as read (its dtype, its shape past the first dimension).
uint64_t RowBytes(const TensorMeta& t) {
  const int64_t cols = t.shape.size() > 1 ? t.shape[1] : 1;
  return static_cast<uint64_t>(cols) * (DTypeBits(t.dtype) / 8);
}

}  // namespace

Status ReadSourceRows(const SourceCheckpoint& src, size_t i, int64_t r0, int64_t n,
                      std::span<uint8_t> out) {
  const TensorMeta& t = src.tensors[i];
  if (IsDecoded(src, i)) return src.decode[i].decoder->ReadRows(src, t, r0, n, out);
  return src.files.shard(src.tensor_shard[i])
      .ReadTensorBytes(src.entries[i], static_cast<uint64_t>(r0) * RowBytes(t), out);
}

Status ConsumeSourceRows(const SourceCheckpoint& src, size_t i, int64_t r0, int64_t n,
                         const std::function<Status(std::span<const uint8_t>)>& consume) {
  const TensorMeta& t = src.tensors[i];
  const size_t bytes = static_cast<size_t>(static_cast<uint64_t>(n) * RowBytes(t));
  if (IsDecoded(src, i)) {
    // Not zero-filled: the decoder writes every byte or fails.
    std::unique_ptr<uint8_t[]> rows(new uint8_t[bytes]);
    SPK_RETURN_IF_ERROR(ReadSourceRows(src, i, r0, n, {rows.get(), bytes}));
    return consume({rows.get(), bytes});
  }
  const SafetensorsReader& reader = src.files.shard(src.tensor_shard[i]);
  SPK_ASSIGN_OR_RETURN(
      FileView view,
      reader.ViewTensorBytes(src.entries[i], static_cast<uint64_t>(r0) * RowBytes(t), bytes));
  Status consumed;
  const Status s = view.Consume([&](std::span<const uint8_t> rows) {
    if (reinterpret_cast<uintptr_t>(rows.data()) % 8 == 0) return consumed = consume(rows);
    // A tensor at a file offset its dtype's loads may not assume (a header not padded to a
    // multiple of 8 bytes): copied, still under the view's guard.
    std::unique_ptr<uint8_t[]> copy(new uint8_t[rows.size()]);
    std::memcpy(copy.get(), rows.data(), rows.size());
    return consumed = consume({copy.get(), rows.size()});
  });
  // The view's own error (the file was truncated while read) lacks the tensor's name.
  if (!s.ok() && s.message() != consumed.message()) {
    return s.WithContext("tensor '" + t.name + "'");
  }
  return s;
}

TensorProducer SourceTensorProducer(const SourceCheckpoint& src, size_t i) {
  if (src.decode.empty() || !src.decode[i].decoded()) {
    return CopyTensorProducer(src.files.shard(src.tensor_shard[i]), src.entries[i]);
  }
  const TensorMeta& t = src.tensors[i];
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const uint64_t row_bytes = static_cast<uint64_t>(cols) * (DTypeBits(t.dtype) / 8);
  const int64_t per_block = std::max<int64_t>(
      1, static_cast<int64_t>(kWriterBlockBytes / std::max<uint64_t>(row_bytes, 1)));
  TensorProducer p;
  p.blocks = static_cast<size_t>((rows + per_block - 1) / per_block);
  p.write_block = [&src, i, rows, per_block, row_bytes](size_t b, const TensorSink& out) -> Status {
    const int64_t r0 = static_cast<int64_t>(b) * per_block;
    const int64_t n = std::min(per_block, rows - r0);
    std::vector<uint8_t> buf(static_cast<size_t>(n) * row_bytes);
    SPK_RETURN_IF_ERROR(ReadSourceRows(src, i, r0, n, buf));
    SPK_RETURN_IF_ERROR(out.Write(0, static_cast<uint64_t>(r0) * row_bytes, buf));
    out.Advance(buf.size());
    return Status::Ok();
  };
  return p;
}

Result<SourceCheckpoint> OpenDenseSource(FileSystem* fs, const std::string& spec) {
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint src, OpenSourceCheckpoint(fs, spec));
  SPK_RETURN_IF_ERROR(ExpandFusedExperts(&src));
  SPK_RETURN_IF_ERROR(DecodeQuantizedSource(&src));
  return src;
}

}  // namespace spk
