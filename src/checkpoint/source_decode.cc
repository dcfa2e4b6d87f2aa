#include "checkpoint/source_decode.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "quant/float_formats.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

constexpr std::string_view kScaleSuffix = "_scale_inv";  // X.weight -> X.weight_scale_inv

// The formats a quantization_config may name that DecodeQuantizedSource reads, for messages.
constexpr std::string_view kDecodable = "fp8 (weight_scale_inv blocks: DeepSeek-V3, Kimi K2)";

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

}  // namespace

Status DecodeQuantizedSource(SourceCheckpoint* src) {
  if (!src->config.has_quantization_config) return Status::Ok();
  const nlohmann::ordered_json& qc = src->config.json["quantization_config"];
  const std::string method =
      qc.is_object() && qc.contains("quant_method") && qc["quant_method"].is_string()
          ? qc["quant_method"].get<std::string>()
          : "";
  if (method != "fp8") {
    return Refuse(*src, method.empty() ? std::string("a quantization_config without quant_method")
                                       : fmt::format("quant_method {}", method));
  }
  SPK_ASSIGN_OR_RETURN(auto block, BlockSize(*src, qc));
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < src->tensors.size(); ++i) by_name[src->tensors[i].name] = i;
  std::vector<bool> consumed(src->tensors.size(), false);
  std::vector<SourceDecode> decode(src->tensors.size());
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    TensorMeta& t = src->tensors[i];
    const bool is_scale = t.name.ends_with(kScaleSuffix);
    if (t.dtype != DType::kF8E4M3 || is_scale) continue;
    const size_t shard = src->tensor_shard[i];
    auto s = by_name.find(t.name + std::string(kScaleSuffix));
    if (s == by_name.end()) {
      return BadTensor(*src, shard, t.name,
                       fmt::format("F8_E4M3 without its {}{}: the weight cannot be decoded; the "
                                   "checkpoint is incomplete (re-download it)",
                                   t.name, kScaleSuffix));
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
    decode[i] = {true,        src->entries[i], src->entries[s->second],
                 scale_shard, block.first,     block.second};
    consumed[s->second] = true;
    t.dtype = DType::kBF16;
  }
  std::string decoded_from = qc.dump();  // before src->config moves
  SourceCheckpoint kept{src->dir, std::move(src->files),  std::move(src->config), {}, {}, {},
                        {},       std::move(decoded_from)};
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    if (consumed[i]) continue;
    if (src->tensors[i].name.ends_with(kScaleSuffix)) {
      return BadTensor(kept, src->tensor_shard[i], src->tensors[i].name,
                       "a scale whose F8_E4M3 weight is not in the checkpoint");
    }
    kept.tensors.push_back(std::move(src->tensors[i]));
    kept.tensor_shard.push_back(src->tensor_shard[i]);
    kept.entries.push_back(std::move(src->entries[i]));
    kept.decode.push_back(std::move(decode[i]));
  }
  *src = std::move(kept);
  return Status::Ok();
}

Status ReadSourceRows(const SourceCheckpoint& src, size_t i, int64_t r0, int64_t n,
                      std::span<uint8_t> out) {
  const TensorMeta& t = src.tensors[i];
  const int64_t cols = t.shape.size() > 1 ? t.shape[1] : 1;
  const SafetensorsReader& reader = src.files.shard(src.tensor_shard[i]);
  if (src.decode.empty() || !src.decode[i].fp8_block) {
    const uint64_t row_bytes = static_cast<uint64_t>(cols) * (DTypeBits(t.dtype) / 8);
    return reader.ReadTensorBytes(src.entries[i], static_cast<uint64_t>(r0) * row_bytes, out);
  }
  const SourceDecode& d = src.decode[i];
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
  if (src.decode.empty() || !src.decode[i].fp8_block) {
    return CopyTensorProducer(src.files.shard(src.tensor_shard[i]), src.entries[i]);
  }
  const TensorMeta& t = src.tensors[i];
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const uint64_t row_bytes = static_cast<uint64_t>(cols) * 2;
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
