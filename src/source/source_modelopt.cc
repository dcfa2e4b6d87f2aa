// The ModelOpt source format (NVIDIA TensorRT Model Optimizer's Hugging Face export, quant_method
// "modelopt" in config.json, or ModelOpt's hf_quant_config.json for exports up to 0.29):
//   NVFP4, W4A16_NVFP4: `X.weight` U8 [rows, cols / 2], two E2M1 values a byte, the even column in
//   the low nibble; `X.weight_scale` F8_E4M3 [rows, cols / group_size]; `X.weight_scale_2` one F32.
//   Decoded as ModelOpt's NVFP4QTensor.dequantize: the block scale times weight_scale_2 in F32,
//   each E2M1 value (ModelOpt's table: nibble 8 is +0) times that in F32, rounded to the model's
//   dtype.
//   FP8, FP8_PER_CHANNEL_PER_TOKEN: `X.weight` F8_E4M3; `X.weight_scale` one F32 (per tensor) or
//   one per row. Decoded as FP8QTensor.dequantize: the value and the scale each in the model's
//   dtype, their product rounded to it.
// MIXED_PRECISION (quantized_layers: each layer's quant_algo and group_size) is decoded when every
// layer's algorithm is one of those. The model's dtype is config.json's torch_dtype (dtype) when it
// is bfloat16, float16 or float32 (what the export keeps its dense tensors in and dequantizes to),
// else BF16. The activation and KV-cache scales (`input_scale`, `k_scale`, `v_scale`) are consumed.
// See source/source_formats.h.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "quant/stored_names.h"
#include "source/source_decode.h"
#include "source/source_formats.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kScale2 = ".weight_scale_2";

// The quant_algo values decoded: ModelOpt's NVFP4 and FP8 weight formats.
constexpr std::array<std::string_view, 4> kDecodedAlgos = {"NVFP4", "W4A16_NVFP4", "FP8",
                                                           "FP8_PER_CHANNEL_PER_TOKEN"};

// ModelOpt's E2M1 values by nibble: the sign bit over {0, 0.5, 1, 1.5, 2, 3, 4, 6}, with nibble 8
// decoded as +0 (not -0), as ModelOpt's NVFP4 dequantization does.
constexpr std::array<float, 16> kE2M1 = {0.0f, 0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                         0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// What the quantization config says: the algorithm and the NVFP4 group size, and for
// MIXED_PRECISION the group size of each NVFP4 layer that names one.
struct ModeloptConfig {
  std::string quant_algo;
  int64_t group_size = 16;
  std::map<std::string, int64_t, std::less<>> layer_group_size;

  int64_t GroupSizeOf(std::string_view module) const {
    auto it = layer_group_size.find(module);
    return it == layer_group_size.end() ? group_size : it->second;
  }
};

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  return s;
}

bool Decoded(const std::string& algo) {
  return std::find(kDecodedAlgos.begin(), kDecodedAlgos.end(), algo) != kDecodedAlgos.end();
}

// `size` (a group_size entry, or null when there is none) into `out`.
Status ReadGroupSize(const SourceCheckpoint& src, const Json* size, int64_t* out) {
  if (size == nullptr || size->is_null()) return Status::Ok();
  if (!size->is_number_integer() || size->get<int64_t>() <= 0 || size->get<int64_t>() % 2 != 0) {
    return RefuseSource(
        src, fmt::format("ModelOpt group_size {} is not a positive even integer", size->dump()));
  }
  *out = size->get<int64_t>();
  return Status::Ok();
}

const Json* Member(const Json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

// Reads both forms ModelOpt writes: hf_quant_config.json's {"quantization": {"quant_algo",
// "group_size", "quantized_layers", ...}} and config.json's {"quant_algo", "quantized_layers",
// "config_groups": {"group_0": {"weights": {"group_size"}}}} (as vLLM reads them too); quant_algo
// is compared in upper case. MIXED_PRECISION is decoded when each of its layers is.
Result<ModeloptConfig> ParseModeloptConfig(const SourceCheckpoint& src, const Json& qc) {
  const Json* q = &qc;
  if (const Json* inner = Member(qc, "quantization"); inner && inner->is_object()) q = inner;
  ModeloptConfig c;
  if (const Json* algo = Member(*q, "quant_algo"); algo && algo->is_string()) {
    c.quant_algo = Upper(algo->get<std::string>());
  }
  const std::string decoded =
      fmt::format("{} (and MIXED_PRECISION of those)", fmt::join(kDecodedAlgos, ", "));
  if (c.quant_algo == "MIXED_PRECISION") {
    const Json* layers = Member(*q, "quantized_layers");
    if (layers == nullptr || !layers->is_object()) {
      return RefuseSource(src, "ModelOpt quant_algo MIXED_PRECISION without quantized_layers");
    }
    for (const auto& [name, layer] : layers->items()) {
      const Json* algo = Member(layer, "quant_algo");
      const std::string a = algo && algo->is_string() ? Upper(algo->get<std::string>()) : "";
      if (!Decoded(a)) {
        return RefuseSource(src, fmt::format("ModelOpt MIXED_PRECISION with layer {} in quant_algo "
                                             "{}; ModelOpt sources are decoded for {} only",
                                             name, a.empty() ? "missing" : a, decoded));
      }
      int64_t size = c.group_size;
      SPK_RETURN_IF_ERROR(ReadGroupSize(src, Member(layer, "group_size"), &size));
      c.layer_group_size.emplace(name, size);
    }
    return c;
  }
  if (!Decoded(c.quant_algo)) {
    return RefuseSource(src,
                        fmt::format("ModelOpt quant_algo {}; ModelOpt sources are decoded for {} "
                                    "only",
                                    c.quant_algo.empty() ? "missing" : c.quant_algo, decoded));
  }
  const Json* size = Member(*q, "group_size");
  if (const Json* groups = Member(*q, "config_groups"); size == nullptr && groups) {
    for (const auto& [name, group] : groups->items()) {
      if (const Json* weights = Member(group, "weights"); weights && !size) {
        size = Member(*weights, "group_size");
      }
    }
  }
  SPK_RETURN_IF_ERROR(ReadGroupSize(src, size, &c.group_size));
  return c;
}

// The dtype ModelOpt's export keeps dense tensors in and dequantizes to: the config's torch_dtype.
DType DecodedDType(const ModelConfig& config) {
  for (DType d : {DType::kBF16, DType::kF16, DType::kF32}) {
    if (config.torch_dtype == TorchDTypeName(d)) return d;
  }
  return DType::kBF16;
}

// Writes float `v` as element k of `out`, in `dtype` (BF16, F16 or F32), rounding to nearest even.
inline void Store(DType dtype, float v, uint8_t* out, size_t k) {
  switch (dtype) {
    case DType::kBF16:
      reinterpret_cast<uint16_t*>(out)[k] = FloatToBF16(v);
      return;
    case DType::kF16:
      reinterpret_cast<uint16_t*>(out)[k] = FloatToF16(v);
      return;
    default:
      reinterpret_cast<float*>(out)[k] = v;
  }
}

// Reads `count` elements of a float scale tensor (F32, BF16 or F16) from element `first`, as
// floats, and refuses a non-finite one naming the tensor, the weight and `where` it is.
Status ReadScales(const SourceCheckpoint& src, const ShardTensor& s, int64_t first, size_t count,
                  const std::string& weight, std::vector<float>* out) {
  const size_t elem = DTypeBits(s.entry.dtype) / 8;
  std::vector<uint8_t> bytes(count * elem);
  SPK_RETURN_IF_ERROR(src.files.shard(s.shard).ReadTensorBytes(
      s.entry, static_cast<uint64_t>(first) * elem, bytes));
  out->resize(count);
  ConvertToFloat(s.entry.dtype, bytes.data(), out->data(), count);
  for (size_t k = 0; k < count; ++k) {
    if (!std::isfinite((*out)[k])) {
      return BadSourceTensor(
          src, s.shard, s.entry.name,
          fmt::format("non-finite scale {} at element {}: the weight '{}' cannot "
                      "be decoded",
                      (*out)[k], first + static_cast<int64_t>(k), weight));
    }
  }
  return Status::Ok();
}

class NvFp4Decoder : public SourceTensorDecoder {
 public:
  NvFp4Decoder(ShardTensor values, ShardTensor scale, ShardTensor scale_2, int64_t group_size)
      : values_(std::move(values)),
        scale_(std::move(scale)),
        scale_2_(std::move(scale_2)),
        group_size_(group_size) {}

  Status ReadRows(const SourceCheckpoint& src, const TensorMeta& t, int64_t r0, int64_t n,
                  std::span<uint8_t> out) const override {
    const int64_t cols = t.shape[1], packed = cols / 2, groups = cols / group_size_;
    std::vector<uint8_t> values(static_cast<size_t>(n * packed));
    SPK_RETURN_IF_ERROR(
        src.files.shard(values_.shard)
            .ReadTensorBytes(values_.entry, static_cast<uint64_t>(r0 * packed), values));
    std::vector<uint8_t> scales(static_cast<size_t>(n * groups));
    SPK_RETURN_IF_ERROR(
        src.files.shard(scale_.shard)
            .ReadTensorBytes(scale_.entry, static_cast<uint64_t>(r0 * groups), scales));
    std::vector<float> scale_2;
    SPK_RETURN_IF_ERROR(ReadScales(src, scale_2_, 0, 1, t.name, &scale_2));
    const std::array<float, 256>& e4m3 = E4M3Values();
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        const float block = e4m3[scales[r * groups + g]];
        if (!std::isfinite(block)) {
          return BadSourceTensor(
              src, scale_.shard, scale_.entry.name,
              fmt::format("non-finite scale {} at block [{}, {}]: the weight '{}' cannot be "
                          "decoded",
                          block, r0 + r, g, t.name));
        }
        // F32: (weight_scale.float() * weight_scale_2), then each value times it, then the dtype.
        const float s = block * scale_2[0];
        const uint8_t* v = values.data() + r * packed + g * group_size_ / 2;
        const size_t o = static_cast<size_t>(r * cols + g * group_size_);
        for (int64_t k = 0; k < group_size_ / 2; ++k) {
          Store(t.dtype, kE2M1[v[k] & 0x0F] * s, out.data(), o + 2 * k);
          Store(t.dtype, kE2M1[v[k] >> 4] * s, out.data(), o + 2 * k + 1);
        }
      }
    }
    return Status::Ok();
  }

 private:
  ShardTensor values_, scale_, scale_2_;
  int64_t group_size_;
};

class Fp8Decoder : public SourceTensorDecoder {
 public:
  Fp8Decoder(ShardTensor values, ShardTensor scale, bool per_row)
      : values_(std::move(values)), scale_(std::move(scale)), per_row_(per_row) {}

  Status ReadRows(const SourceCheckpoint& src, const TensorMeta& t, int64_t r0, int64_t n,
                  std::span<uint8_t> out) const override {
    const int64_t cols = t.shape[1];
    std::vector<uint8_t> values(static_cast<size_t>(n * cols));
    SPK_RETURN_IF_ERROR(
        src.files.shard(values_.shard)
            .ReadTensorBytes(values_.entry, static_cast<uint64_t>(r0 * cols), values));
    std::vector<float> scales;
    SPK_RETURN_IF_ERROR(ReadScales(src, scale_, per_row_ ? r0 : 0,
                                   per_row_ ? static_cast<size_t>(n) : 1, t.name, &scales));
    const std::array<float, 256>& e4m3 = E4M3Values();
    for (int64_t r = 0; r < n; ++r) {
      // q.to(dtype) * scale.to(dtype): E4M3 values are exact in BF16, F16 and F32; the scale
      // rounds to the dtype, the product is computed in F32 and rounded to the dtype.
      const float s = RoundToDType(scales[per_row_ ? r : 0], t.dtype);
      const uint8_t* v = values.data() + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        Store(t.dtype, e4m3[v[c]] * s, out.data(), static_cast<size_t>(r * cols + c));
      }
    }
    return Status::Ok();
  }

 private:
  ShardTensor values_, scale_;
  bool per_row_;  // one scale a row, else one for the tensor
};

bool IsFloatScale(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The tensors ModelOpt writes beside the weights that describe the source's own activation and
// KV-cache quantization: consumed, as the output quantizes only the weights.
bool IsActivationScale(const std::string& name) {
  return name.ends_with(".input_scale") || name.ends_with(".k_scale") || name.ends_with(".v_scale");
}

}  // namespace

Status DecodeModeloptSource(SourceCheckpoint* src, const nlohmann::ordered_json& qc) {
  SPK_ASSIGN_OR_RETURN(ModeloptConfig mc, ParseModeloptConfig(*src, qc));
  const DType dtype = DecodedDType(src->config);
  std::map<std::string, size_t, std::less<>> by_name;
  for (size_t i = 0; i < src->tensors.size(); ++i) by_name[src->tensors[i].name] = i;
  std::vector<bool> keep(src->tensors.size(), true);
  std::vector<SourceDecode> decode(src->tensors.size());
  auto stored = [&](size_t i) { return ShardTensor{src->tensor_shard[i], src->entries[i]}; };
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    TensorMeta& t = src->tensors[i];
    const size_t shard = src->tensor_shard[i];
    if (t.name.ends_with(".pre_quant_scale")) {
      return BadSourceTensor(*src, shard, t.name,
                             "ModelOpt's pre_quant_scale (AWQ, SmoothQuant) is not decoded");
    }
    if (IsActivationScale(t.name)) {
      keep[i] = false;
      continue;
    }
    const bool nvfp4 = t.dtype == DType::kU8, fp8 = t.dtype == DType::kF8E4M3;
    if (!t.name.ends_with(kWeightSuffix) || (!nvfp4 && !fp8)) continue;
    const std::string module = t.name.substr(0, t.name.size() - kWeightSuffix.size());
    auto s = by_name.find(module + std::string(kScaleSuffix));
    if (s == by_name.end()) {
      return BadSourceTensor(*src, shard, t.name,
                             fmt::format("{} without its {}{}: the weight cannot be decoded; the "
                                         "checkpoint is incomplete (re-download it)",
                                         DTypeName(t.dtype), module, kScaleSuffix));
    }
    const TensorMeta& scale = src->tensors[s->second];
    const size_t scale_shard = src->tensor_shard[s->second];
    if (t.shape.size() != 2) {
      return BadSourceTensor(
          *src, shard, t.name,
          fmt::format("a quantized {} weight that is not 2-D is not decoded", DTypeName(t.dtype)));
    }
    const int64_t rows = t.shape[0];
    if (nvfp4) {
      const int64_t group_size = mc.GroupSizeOf(module);
      auto s2 = by_name.find(module + std::string(kScale2));
      if (s2 == by_name.end()) {
        return BadSourceTensor(*src, shard, t.name,
                               fmt::format("NVFP4 (U8) without its {}{}: the weight cannot be "
                                           "decoded; the checkpoint is incomplete (re-download it)",
                                           module, kScale2));
      }
      const TensorMeta& scale_2 = src->tensors[s2->second];
      const int64_t cols = 2 * t.shape[1];
      if (cols % group_size != 0) {
        return BadSourceTensor(
            *src, shard, t.name,
            fmt::format("{} columns are not whole groups of {}", cols, group_size));
      }
      const std::vector<int64_t> grid = {rows, cols / group_size};
      if (scale.dtype != DType::kF8E4M3) {
        return BadSourceTensor(
            *src, scale_shard, scale.name,
            fmt::format("dtype {} where NVFP4 block scales are F8_E4M3", DTypeName(scale.dtype)));
      }
      if (scale.shape != grid) {
        return BadSourceTensor(
            *src, scale_shard, scale.name,
            fmt::format("shape [{}] where the weight's {} x {} values in groups of {} need [{}]",
                        fmt::join(scale.shape, ", "), rows, cols, group_size,
                        fmt::join(grid, ", ")));
      }
      if (!IsFloatScale(scale_2.dtype) || Elements(scale_2.shape) != 1 ||
          scale_2.shape.size() > 1) {
        return BadSourceTensor(
            *src, src->tensor_shard[s2->second], scale_2.name,
            fmt::format("{} [{}] where one F32 scale is expected", DTypeName(scale_2.dtype),
                        fmt::join(scale_2.shape, ", ")));
      }
      decode[i].decoder = std::make_shared<NvFp4Decoder>(stored(i), stored(s->second),
                                                         stored(s2->second), group_size);
      keep[s2->second] = false;
      t.shape[1] = cols;
    } else {
      const bool per_tensor = Elements(scale.shape) == 1 && scale.shape.size() <= 1;
      const bool per_row =
          scale.shape == std::vector<int64_t>{rows} || scale.shape == std::vector<int64_t>{rows, 1};
      if (!IsFloatScale(scale.dtype)) {
        return BadSourceTensor(*src, scale_shard, scale.name,
                               fmt::format("dtype {} where F32, BF16 or F16 scales are expected",
                                           DTypeName(scale.dtype)));
      }
      if (!per_tensor && !per_row) {
        return BadSourceTensor(
            *src, scale_shard, scale.name,
            fmt::format("shape [{}] where one scale, or one a row ([{}]), is "
                        "expected for the weight's [{}]",
                        fmt::join(scale.shape, ", "), rows, fmt::join(t.shape, ", ")));
      }
      decode[i].decoder = std::make_shared<Fp8Decoder>(stored(i), stored(s->second), !per_tensor);
    }
    keep[s->second] = false;
    t.dtype = dtype;
  }
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    const std::string& name = src->tensors[i].name;
    if (keep[i] && (name.ends_with(kScaleSuffix) || name.ends_with(kScale2))) {
      return BadSourceTensor(*src, src->tensor_shard[i], name,
                             "a scale whose quantized (U8 or F8_E4M3) weight is not in the "
                             "checkpoint");
    }
  }
  KeepSourceTensors(src, keep, std::move(decode));
  return Status::Ok();
}

}  // namespace spk
