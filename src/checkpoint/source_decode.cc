#include "checkpoint/source_decode.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "checkpoint/module_reader.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/quantized_modules.h"
#include "quant/float_formats.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

constexpr std::string_view kFp8ScaleSuffix = "_scale_inv";  // X.weight -> X.weight_scale_inv

// The formats a quantization_config may name that DecodeQuantizedSource reads, for messages.
constexpr std::string_view kDecodable =
    "compressed-tensors (every format sparkulator writes) and fp8 (weight_scale_inv blocks: "
    "DeepSeek-V3, Kimi K2)";

Status Refuse(const SourceCheckpoint& src, std::string_view why) {
  return Status::InvalidInput(fmt::format(
      "{}/config.json: the model is already quantized ({}); sparkulator decodes sources of {} "
      "only: quantize the original BF16/F16/F32 checkpoint instead",
      src.dir, why, kDecodable));
}

// weight_block_size [rows, cols] of an fp8 quantization_config, both positive.
Result<std::pair<int64_t, int64_t>> BlockSize(const SourceCheckpoint& src,
                                              const nlohmann::ordered_json& qc) {
  auto it = qc.find("weight_block_size");
  if (it == qc.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_number_integer() ||
      !(*it)[1].is_number_integer() || (*it)[0].get<int64_t>() <= 0 ||
      (*it)[1].get<int64_t>() <= 0) {
    return Refuse(src,
                  "quant_method fp8 without a weight_block_size of two positive integers: "
                  "per-tensor FP8 is not decoded yet");
  }
  return std::pair<int64_t, int64_t>{(*it)[0].get<int64_t>(), (*it)[1].get<int64_t>()};
}

// Every E4M3 byte's value, so that the decode loop is a load and a multiply.
const std::array<float, 256>& E4M3Values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = E4M3ToFloat(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

int64_t Blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }

Status BadTensor(const SourceCheckpoint& src, size_t shard, std::string_view tensor,
                 const std::string& why) {
  return Status::InvalidInput(
      fmt::format("{}/{}: tensor '{}': {}", src.dir, src.files.shard_files()[shard], tensor, why));
}

std::string ModuleOf(const std::string& name) { return name.substr(0, name.rfind('.')); }

// Rows [r0, r0 + n) of a compressed-tensors module: the reader decodes from a multiple of its
// row alignment (128 for FP8 blocks), so the rows around them are decoded and dropped.
Status ReadModuleRows(const QuantizedModuleReader& m, int64_t r0, int64_t n, uint64_t row_bytes,
                      std::span<uint8_t> out) {
  const int64_t align = m.row_alignment();
  const int64_t a0 = r0 / align * align;
  const int64_t a1 = std::min(m.rows(), (r0 + n + align - 1) / align * align);
  QuantizedModuleReader::RowBlock block;
  SPK_RETURN_IF_ERROR(m.ReadRows(a0, a1 - a0, &block));
  std::memcpy(out.data(), block.bytes.data() + static_cast<size_t>(r0 - a0) * row_bytes,
              static_cast<size_t>(n) * row_bytes);
  return Status::Ok();
}

// Replaces `src`'s lists by the tensors `keep` says stay (each with its decode record), in order.
void KeepTensors(SourceCheckpoint* src, const std::vector<bool>& keep,
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

// FP8 blocks: each F8_E4M3 weight with its weight_scale_inv, which is consumed.
Status DecodeFp8Blocks(SourceCheckpoint* src, std::pair<int64_t, int64_t> block) {
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < src->tensors.size(); ++i) by_name[src->tensors[i].name] = i;
  std::vector<bool> keep(src->tensors.size(), true);
  std::vector<SourceDecode> decode(src->tensors.size());
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    TensorMeta& t = src->tensors[i];
    if (t.dtype != DType::kF8E4M3 || t.name.ends_with(kFp8ScaleSuffix)) continue;
    const size_t shard = src->tensor_shard[i];
    auto s = by_name.find(t.name + std::string(kFp8ScaleSuffix));
    if (s == by_name.end()) {
      return BadTensor(*src, shard, t.name,
                       fmt::format("F8_E4M3 without its {}{}: the weight cannot be decoded; the "
                                   "checkpoint is incomplete (re-download it)",
                                   t.name, kFp8ScaleSuffix));
    }
    const TensorMeta& scale = src->tensors[s->second];
    const size_t scale_shard = src->tensor_shard[s->second];
    if (t.shape.size() != 2) {
      return BadTensor(*src, shard, t.name, "an F8_E4M3 weight that is not 2-D is not decoded");
    }
    const std::vector<int64_t> grid = {Blocks(t.shape[0], block.first),
                                       Blocks(t.shape[1], block.second)};
    if (scale.shape != grid) {
      return BadTensor(*src, scale_shard, scale.name,
                       fmt::format("shape [{}] where the weight's [{}] in {}x{} blocks needs [{}]",
                                   fmt::join(scale.shape, ", "), fmt::join(t.shape, ", "),
                                   block.first, block.second, fmt::join(grid, ", ")));
    }
    if (scale.dtype != DType::kF32 && scale.dtype != DType::kBF16 && scale.dtype != DType::kF16) {
      return BadTensor(*src, scale_shard, scale.name,
                       fmt::format("dtype {} where F32, BF16 or F16 scales are expected",
                                   DTypeName(scale.dtype)));
    }
    decode[i].fp8_block = true;
    decode[i].values = src->entries[i];
    decode[i].scale = src->entries[s->second];
    decode[i].scale_shard = scale_shard;
    decode[i].block_rows = block.first;
    decode[i].block_cols = block.second;
    keep[s->second] = false;
    t.dtype = DType::kBF16;
  }
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    if (keep[i] && src->tensors[i].name.ends_with(kFp8ScaleSuffix)) {
      return BadTensor(*src, src->tensor_shard[i], src->tensors[i].name,
                       "a scale whose F8_E4M3 weight is not in the checkpoint");
    }
  }
  KeepTensors(src, keep, std::move(decode));
  return Status::Ok();
}

// compressed-tensors: each quantized module's stored tensors become its dense `.weight`, read
// through the module reader that `dequantize` writes with (compressed-tensors' decompress).
Status DecodeCompressedTensors(SourceCheckpoint* src) {
  SPK_ASSIGN_OR_RETURN(CheckpointScheme scheme,
                       SchemeFromConfig(src->dir + "/config.json", src->config));
  const WeightCodec& codec = *scheme.scheme->codec;
  auto has = [&](const std::string& name) { return src->files.Find(name).has_value(); };
  std::vector<bool> keep(src->tensors.size(), true);
  std::vector<SourceDecode> decode(src->tensors.size());
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    TensorMeta& t = src->tensors[i];
    if (auto module = QuantizedModuleOf(codec, t.name, t.dtype, has)) {
      SPK_ASSIGN_OR_RETURN(QuantizedModuleReader reader,
                           QuantizedModuleReader::Open(*src, *module, scheme));
      t = TensorMeta{*module + ".weight", reader.dtype(), {reader.rows(), reader.cols()}, ""};
      decode[i].module = std::make_shared<const QuantizedModuleReader>(std::move(reader));
    } else if (IsQuantAuxName(codec, t.name) &&
               src->files.Find(ModuleOf(t.name) + std::string(ValueSuffix(codec)))) {
      keep[i] = false;  // read by its module's reader
    }
  }
  KeepTensors(src, keep, std::move(decode));
  return Status::Ok();
}

}  // namespace

std::string SourceQuantMethod(const ModelConfig& config) {
  if (!config.has_quantization_config) return "";
  const nlohmann::ordered_json& qc = config.json["quantization_config"];
  return qc.is_object() && qc.contains("quant_method") && qc["quant_method"].is_string()
             ? qc["quant_method"].get<std::string>()
             : "";
}

Status DecodeQuantizedSource(SourceCheckpoint* src) {
  if (!src->config.has_quantization_config) return Status::Ok();
  const nlohmann::ordered_json& qc = src->config.json["quantization_config"];
  const std::string method = SourceQuantMethod(src->config);
  if (method == "compressed-tensors") {
    SPK_RETURN_IF_ERROR(DecodeCompressedTensors(src));
  } else if (method == "fp8") {
    SPK_ASSIGN_OR_RETURN(auto block, BlockSize(*src, qc));
    SPK_RETURN_IF_ERROR(DecodeFp8Blocks(src, block));
  } else {
    return Refuse(*src, method.empty() ? std::string("a quantization_config without quant_method")
                                       : fmt::format("quant_method {}", method));
  }
  src->decoded_from = qc.dump();
  return Status::Ok();
}

Status ReadSourceRows(const SourceCheckpoint& src, size_t i, int64_t r0, int64_t n,
                      std::span<uint8_t> out) {
  const TensorMeta& t = src.tensors[i];
  const int64_t cols = t.shape.size() > 1 ? t.shape[1] : 1;
  const SafetensorsReader& reader = src.files.shard(src.tensor_shard[i]);
  const uint64_t row_bytes = static_cast<uint64_t>(cols) * (DTypeBits(t.dtype) / 8);
  if (src.decode.empty() || !src.decode[i].decoded()) {
    return reader.ReadTensorBytes(src.entries[i], static_cast<uint64_t>(r0) * row_bytes, out);
  }
  const SourceDecode& d = src.decode[i];
  if (d.module != nullptr) return ReadModuleRows(*d.module, r0, n, row_bytes, out);
  const size_t count = static_cast<size_t>(n * cols);
  std::unique_ptr<uint8_t[]> values(new uint8_t[count]);
  SPK_RETURN_IF_ERROR(
      reader.ReadTensorBytes(d.values, static_cast<uint64_t>(r0 * cols), {values.get(), count}));
  // The scale rows the block of rows spans.
  const int64_t scale_cols = d.scale.shape[1];
  const int64_t s0 = r0 / d.block_rows, s1 = (r0 + n - 1) / d.block_rows;
  const size_t scale_count = static_cast<size_t>((s1 - s0 + 1) * scale_cols);
  const size_t scale_elem = DTypeBits(d.scale.dtype) / 8;
  std::vector<uint8_t> scale_bytes(scale_count * scale_elem);
  SPK_RETURN_IF_ERROR(src.files.shard(d.scale_shard)
                          .ReadTensorBytes(d.scale, s0 * scale_cols * scale_elem, scale_bytes));
  std::vector<float> scales(scale_count);
  ConvertToFloat(d.scale.dtype, scale_bytes.data(), scales.data(), scale_count);
  for (size_t k = 0; k < scale_count; ++k) {
    if (!std::isfinite(scales[k])) {
      const int64_t row = s0 + static_cast<int64_t>(k) / scale_cols;
      return BadTensor(src, d.scale_shard, d.scale.name,
                       fmt::format("non-finite scale {} at block [{}, {}]: the weight '{}' "
                                   "cannot be decoded",
                                   scales[k], row, static_cast<int64_t>(k) % scale_cols, t.name));
    }
  }
  auto* dst = reinterpret_cast<uint16_t*>(out.data());
  const std::array<float, 256>& e4m3 = E4M3Values();
  for (int64_t r = 0; r < n; ++r) {
    const float* scale_row = scales.data() + ((r0 + r) / d.block_rows - s0) * scale_cols;
    const uint8_t* v = values.get() + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      // F32 product, then BF16 round-to-nearest-even: (q.float() * s).to(bfloat16).
      dst[r * cols + c] = FloatToBF16(e4m3[v[c]] * scale_row[c / d.block_cols]);
    }
  }
  return Status::Ok();
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

}  // namespace spk
