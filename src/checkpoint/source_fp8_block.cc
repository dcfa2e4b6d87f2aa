// The fp8 block source format (transformers' FineGrainedFP8; DeepSeek-V3, Kimi K2): each F8_E4M3
// `X.weight` times its `X.weight_scale_inv`, one scale per weight_block_size block, the grid
// rounded up; computed in F32 and rounded to BF16 as transformers' Fp8Dequantize does for a BF16
// model. See checkpoint/source_formats.h.
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "checkpoint/source_decode.h"
#include "checkpoint/source_formats.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

constexpr std::string_view kFp8ScaleSuffix = "_scale_inv";  // X.weight -> X.weight_scale_inv

// weight_block_size [rows, cols] of an fp8 quantization_config, both positive.
Result<std::pair<int64_t, int64_t>> BlockSize(const SourceCheckpoint& src,
                                              const nlohmann::ordered_json& qc) {
  auto it = qc.find("weight_block_size");
  if (it == qc.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_number_integer() ||
      !(*it)[1].is_number_integer() || (*it)[0].get<int64_t>() <= 0 ||
      (*it)[1].get<int64_t>() <= 0) {
    return RefuseSource(src,
                        "quant_method fp8 without a weight_block_size of two positive integers: "
                        "per-tensor FP8 is not decoded yet");
  }
  return std::pair<int64_t, int64_t>{(*it)[0].get<int64_t>(), (*it)[1].get<int64_t>()};
}

int64_t Blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }

class Fp8BlockDecoder : public SourceTensorDecoder {
 public:
  Fp8BlockDecoder(size_t shard, TensorEntry values, size_t scale_shard, TensorEntry scale,
                  std::pair<int64_t, int64_t> block)
      : shard_(shard),
        values_(std::move(values)),
        scale_shard_(scale_shard),
        scale_(std::move(scale)),
        block_rows_(block.first),
        block_cols_(block.second) {}

  Status ReadRows(const SourceCheckpoint& src, const TensorMeta& t, int64_t r0, int64_t n,
                  std::span<uint8_t> out) const override {
    const int64_t cols = t.shape[1];
    const size_t count = static_cast<size_t>(n * cols);
    std::unique_ptr<uint8_t[]> values(new uint8_t[count]);
    SPK_RETURN_IF_ERROR(src.files.shard(shard_).ReadTensorBytes(
        values_, static_cast<uint64_t>(r0 * cols), {values.get(), count}));
    // The scale rows the block of rows spans.
    const int64_t scale_cols = scale_.shape[1];
    const int64_t s0 = r0 / block_rows_, s1 = (r0 + n - 1) / block_rows_;
    const size_t scale_count = static_cast<size_t>((s1 - s0 + 1) * scale_cols);
    const size_t scale_elem = DTypeBits(scale_.dtype) / 8;
    std::vector<uint8_t> scale_bytes(scale_count * scale_elem);
    SPK_RETURN_IF_ERROR(src.files.shard(scale_shard_)
                            .ReadTensorBytes(scale_, s0 * scale_cols * scale_elem, scale_bytes));
    std::vector<float> scales(scale_count);
    ConvertToFloat(scale_.dtype, scale_bytes.data(), scales.data(), scale_count);
    for (size_t k = 0; k < scale_count; ++k) {
      if (!std::isfinite(scales[k])) {
        const int64_t row = s0 + static_cast<int64_t>(k) / scale_cols;
        return BadSourceTensor(
            src, scale_shard_, scale_.name,
            fmt::format("non-finite scale {} at block [{}, {}]: the weight '{}' "
                        "cannot be decoded",
                        scales[k], row, static_cast<int64_t>(k) % scale_cols, t.name));
      }
    }
    auto* dst = reinterpret_cast<uint16_t*>(out.data());
    const std::array<float, 256>& e4m3 = E4M3Values();
    for (int64_t r = 0; r < n; ++r) {
      const float* scale_row = scales.data() + ((r0 + r) / block_rows_ - s0) * scale_cols;
      const uint8_t* v = values.get() + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        // F32 product, then BF16 round-to-nearest-even: (q.float() * s).to(bfloat16).
        dst[r * cols + c] = FloatToBF16(e4m3[v[c]] * scale_row[c / block_cols_]);
      }
    }
    return Status::Ok();
  }

 private:
  size_t shard_;
  TensorEntry values_;  // the stored F8_E4M3 values
  size_t scale_shard_;
  TensorEntry scale_;  // weight_scale_inv, [ceil(rows / block_rows), ceil(cols / block_cols)]
  int64_t block_rows_, block_cols_;
};

}  // namespace

Status DecodeFp8BlockSource(SourceCheckpoint* src, const nlohmann::ordered_json& qc) {
  SPK_ASSIGN_OR_RETURN(auto block, BlockSize(*src, qc));
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
      return BadSourceTensor(*src, shard, t.name,
                             fmt::format("F8_E4M3 without its {}{}: the weight cannot be decoded; "
                                         "the checkpoint is incomplete (re-download it)",
                                         t.name, kFp8ScaleSuffix));
    }
    const TensorMeta& scale = src->tensors[s->second];
    const size_t scale_shard = src->tensor_shard[s->second];
    if (t.shape.size() != 2) {
      return BadSourceTensor(*src, shard, t.name,
                             "an F8_E4M3 weight that is not 2-D is not decoded");
    }
    const std::vector<int64_t> grid = {Blocks(t.shape[0], block.first),
                                       Blocks(t.shape[1], block.second)};
    if (scale.shape != grid) {
      return BadSourceTensor(
          *src, scale_shard, scale.name,
          fmt::format("shape [{}] where the weight's [{}] in {}x{} blocks needs [{}]",
                      fmt::join(scale.shape, ", "), fmt::join(t.shape, ", "), block.first,
                      block.second, fmt::join(grid, ", ")));
    }
    if (scale.dtype != DType::kF32 && scale.dtype != DType::kBF16 && scale.dtype != DType::kF16) {
      return BadSourceTensor(*src, scale_shard, scale.name,
                             fmt::format("dtype {} where F32, BF16 or F16 scales are expected",
                                         DTypeName(scale.dtype)));
    }
    decode[i].decoder = std::make_shared<Fp8BlockDecoder>(shard, src->entries[i], scale_shard,
                                                          src->entries[s->second], block);
    keep[s->second] = false;
    t.dtype = DType::kBF16;
  }
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    if (keep[i] && src->tensors[i].name.ends_with(kFp8ScaleSuffix)) {
      return BadSourceTensor(*src, src->tensor_shard[i], src->tensors[i].name,
                             "a scale whose F8_E4M3 weight is not in the checkpoint");
    }
  }
  KeepSourceTensors(src, keep, std::move(decode));
  return Status::Ok();
}

}  // namespace spk
