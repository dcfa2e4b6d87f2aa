// The block-scaled F8_E4M3 source formats whose scales are `X.weight_scale_inv`: each F8_E4M3
// `X.weight` times its block's scale, computed in F32 and rounded to BF16.
//   fp8 (transformers' FineGrainedFP8; DeepSeek-V3, Kimi K2): F32/BF16/F16 scales, one per
//   weight_block_size block, the grid rounded up; as transformers' Fp8Dequantize does for a BF16
//   model.
//   mxfp8 (MiniMax-M3 and its DSpark draft): U8 (or F8_E8M0) E8M0 exponents, one per 32 inputs of
//   a row, [rows, cols / 32]; 2^(e - 127), as vLLM's dequant_mxfp8_to_bf16
//   (model_executor/layers/quantization/utils/mxfp8_utils.py) decodes what MiniMax's load_weights
//   renames to weight_scale (models/minimax_m3/common/dspark.py).
// One decoder and one pairing loop serve both; a format is its block and its scale encoding.
// See source/source_formats.h.
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "quant/float_formats.h"
#include "source/source_decode.h"
#include "source/source_formats.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

constexpr std::string_view kFp8ScaleSuffix = "_scale_inv";  // X.weight -> X.weight_scale_inv

// MXFP8's block: one E8M0 exponent per 32 inputs of a row (vLLM's MXFP8_BLOCK_SIZE; the scale
// block (1, 32) is the only one ModelOptMxFp8Config reads for a MiniMax-form config).
constexpr int64_t kMxfp8Block = 32;

enum class ScaleCode {
  kFloat,  // F32, BF16 or F16 scale values
  kE8M0,   // U8 or F8_E8M0 bytes e standing for 2^(e - 127); 255 (NaN) is refused as it is read
};

// What tells one block-scaled format from the other.
struct BlockScaledFormat {
  std::pair<int64_t, int64_t> block;  // [rows, cols] of the weight one scale covers
  ScaleCode code;
  // MXFP8: vLLM refuses a weight whose inputs are not whole blocks ("MXFP8 requires input size
  // divisible by 32"), so the grid is not rounded up; fp8 rounds it up (the last block cut).
  bool whole_blocks;
};

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
                  std::pair<int64_t, int64_t> block, ScaleCode code)
      : shard_(shard),
        values_(std::move(values)),
        scale_shard_(scale_shard),
        scale_(std::move(scale)),
        block_rows_(block.first),
        block_cols_(block.second),
        code_(code) {}

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
    if (code_ == ScaleCode::kE8M0) {
      // 2^(e - 127), exact in F32 and BF16 for every e up to 254; 255 gives +inf here, as
      // torch.exp2(255 - 127.0) does in vLLM, and is refused below.
      for (size_t k = 0; k < scale_count; ++k) scales[k] = MxDecompressedScale(scale_bytes[k]);
    } else {
      ConvertToFloat(scale_.dtype, scale_bytes.data(), scales.data(), scale_count);
    }
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
  ScaleCode code_;
};

// Pairs every F8_E4M3 weight of `src` with its `weight_scale_inv` and presents it as BF16 decoded
// by `f`; the scales are consumed. A weight without its scale, a scale of the wrong shape or dtype
// and a scale without its weight are errors naming the tensor.
Status DecodeBlockScaled(SourceCheckpoint* src, const BlockScaledFormat& f) {
  const auto block = f.block;
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
    if (f.whole_blocks && t.shape[1] % block.second != 0) {
      return BadSourceTensor(
          *src, shard, t.name,
          fmt::format("{} inputs, not a multiple of the MXFP8 block {}: vLLM refuses to load it "
                      "(\"MXFP8 requires input size divisible by {}\"); the checkpoint is not "
                      "one vLLM serves",
                      t.shape[1], block.second, block.second));
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
    const bool scale_dtype_ok = f.code == ScaleCode::kE8M0
                                    ? scale.dtype == DType::kU8 || scale.dtype == DType::kF8E8M0
                                    : scale.dtype == DType::kF32 || scale.dtype == DType::kBF16 ||
                                          scale.dtype == DType::kF16;
    if (!scale_dtype_ok) {
      return BadSourceTensor(
          *src, scale_shard, scale.name,
          fmt::format("dtype {} where {} are expected", DTypeName(scale.dtype),
                      f.code == ScaleCode::kE8M0
                          ? "U8 (or F8_E8M0) E8M0 exponents, one per 32 inputs (MXFP8)"
                          : "F32, BF16 or F16 scales"));
    }
    decode[i].decoder = std::make_shared<Fp8BlockDecoder>(shard, src->entries[i], scale_shard,
                                                          src->entries[s->second], block, f.code);
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

// A quantization_config member that is present and not null.
bool Has(const nlohmann::ordered_json& qc, std::string_view key) {
  auto it = qc.find(key);
  return it != qc.end() && !it->is_null();
}

}  // namespace

Status DecodeFp8BlockSource(SourceCheckpoint* src, const nlohmann::ordered_json& qc) {
  SPK_ASSIGN_OR_RETURN(auto block, BlockSize(*src, qc));
  return DecodeBlockScaled(src, {block, ScaleCode::kFloat, /*whole_blocks=*/false});
}

// MiniMax's form of an MXFP8 config (quant_method "mxfp8", ignored_layers), which vLLM's
// ModelOptMxFp8Config.from_config normalizes to ModelOpt MXFP8 (layers/quantization/modelopt.py).
// The dense layers it ignores are stored BF16 and read as they are. A weight_block_size in the
// config is not read, as vLLM does not read it: MXFP8 scales are [1, 32] blocks.
Status DecodeMxfp8Source(SourceCheckpoint* src, const nlohmann::ordered_json& qc) {
  if (Has(qc, "quantization") || Has(qc, "quant_algo")) {
    return RefuseSource(*src,
                        "quant_method mxfp8 in ModelOpt's form (quantization / quant_algo, "
                        "scales in weight_scale): only MiniMax's form (E8M0 weight_scale_inv) "
                        "is decoded");
  }
  if (Has(qc, "moe_quant_algo")) {
    return RefuseSource(*src,
                        "quant_method mxfp8 with moe_quant_algo (MiniMax-M3's routed experts "
                        "stored as compressed-tensors NVFP4): those experts are not decoded yet");
  }
  return DecodeBlockScaled(src, {{1, kMxfp8Block}, ScaleCode::kE8M0, /*whole_blocks=*/true});
}

}  // namespace spk
