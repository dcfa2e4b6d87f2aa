// The GPTQ and AWQ source formats (int2/4/8 weights packed in I32 words, as AutoGPTQ, GPTQModel,
// optimum and AutoAWQ write them): each module's `X.qweight`, `X.qzeros`, `X.scales` (and for
// GPTQ `X.g_idx`) become its dense `X.weight` [out, in], w = (q - z) * s computed in F32 and
// rounded once to the scales' dtype (F16 as published), as GPTQModel's checkpoint dequantizer and
// AutoAWQ's dequantize_gemm write it. See source/source_formats.h.
//
//   GPTQ: qweight [in / pf, out], the codes of input rows k*pf .. k*pf+pf-1 in word k, lowest
//   bits first (pf = 32 / bits); qzeros [groups, out / pf] packed the same way along the outputs;
//   scales [groups, out]; g_idx [in], the group of each input column (any order: desc_act).
//   checkpoint_format "gptq" (v1, the default) stores each zero minus one: z = (stored + 1) mod
//   2^bits, field by field; "gptq_v2" stores z.
//   AWQ (version "gemm", 4 bits): qweight [in, out / 8] and qzeros [groups, out / 8], output
//   column 8c + j in word c at nibble kAwqNibble[j] (AutoAWQ's order 0 2 4 6 1 3 5 7 inverted);
//   scales [groups, out]; input row i is in group i / group_size.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "source/source_decode.h"
#include "source/source_formats.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

enum class Layout { kGptq, kAwq };

// The nibble that holds output column 8c + j of AWQ word c.
constexpr std::array<int, 8> kAwqNibble = {0, 4, 1, 5, 2, 6, 3, 7};

// What decodes one packed module.
struct PackedModule {
  Layout layout = Layout::kGptq;
  int bits = 4;
  bool v1_zeros = false;                                // GPTQ v1: stored zero + 1
  int64_t in = 0, out = 0, groups = 1, group_size = 0;  // group_size: AWQ only
  ShardTensor qweight, qzeros, scales, g_idx;           // g_idx: GPTQ only
};

// Rows [0, rows) x columns [c0, c0 + n) of a row-major tensor `width` elements wide of `elem`
// bytes each, into `out` (rows * n elements): one read when the slice is whole rows, else one per
// row.
Status ReadColumns(const SourceCheckpoint& src, const ShardTensor& t, int64_t rows, int64_t width,
                   size_t elem, int64_t c0, int64_t n, std::vector<uint8_t>* out) {
  out->resize(static_cast<size_t>(rows * n) * elem);
  const SafetensorsReader& reader = src.files.shard(t.shard);
  if (n == width) return reader.ReadTensorBytes(t.entry, 0, *out);
  const size_t row_bytes = static_cast<size_t>(n) * elem;
  for (int64_t r = 0; r < rows; ++r) {
    SPK_RETURN_IF_ERROR(reader.ReadTensorBytes(
        t.entry, static_cast<uint64_t>(r * width + c0) * elem,
        std::span<uint8_t>(out->data() + static_cast<size_t>(r) * row_bytes, row_bytes)));
  }
  return Status::Ok();
}

uint32_t Word(const std::vector<uint8_t>& bytes, size_t i) {
  uint32_t w;
  std::memcpy(&w, bytes.data() + i * 4, 4);
  return w;
}

// dst[i] = lut[group[i] * levels + codes[i]] for `n` elements of type T (unaligned bytes).
template <typename T>
void Gather(const uint8_t* lut, const int32_t* group, const uint8_t* codes, int levels, int64_t n,
            uint8_t* dst) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, lut + (static_cast<size_t>(group[i]) * levels + codes[i]) * sizeof(T),
                sizeof(T));
    std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
  }
}

class PackedIntDecoder : public SourceTensorDecoder {
 public:
  explicit PackedIntDecoder(PackedModule m) : m_(std::move(m)) {}

  Status ReadRows(const SourceCheckpoint& src, const TensorMeta& t, int64_t r0, int64_t n,
                  std::span<uint8_t> out) const override {
    const int pf = 32 / m_.bits;
    const uint32_t mask = (1u << m_.bits) - 1;
    const bool awq = m_.layout == Layout::kAwq;
    // Scales [groups][n], finite.
    std::vector<uint8_t> bytes;
    const size_t scale_elem = DTypeBits(m_.scales.entry.dtype) / 8;
    SPK_RETURN_IF_ERROR(ReadColumns(src, m_.scales, m_.groups, m_.out, scale_elem, r0, n, &bytes));
    std::vector<float> scales(static_cast<size_t>(m_.groups * n));
    ConvertToFloat(m_.scales.entry.dtype, bytes.data(), scales.data(), scales.size());
    for (size_t k = 0; k < scales.size(); ++k) {
      if (!std::isfinite(scales[k])) {
        return BadSourceTensor(src, m_.scales.shard, m_.scales.entry.name,
                               fmt::format("non-finite scale {} at [{}, {}]: the weight '{}' "
                                           "cannot be decoded",
                                           scales[k], static_cast<int64_t>(k) / n,
                                           r0 + static_cast<int64_t>(k) % n, t.name));
      }
    }
    // Zeros [groups][n], from the packed words that hold outputs r0 .. r0 + n - 1.
    const int64_t c0 = r0 / pf, nc = (r0 + n - 1) / pf - c0 + 1;
    SPK_RETURN_IF_ERROR(ReadColumns(src, m_.qzeros, m_.groups, m_.out / pf, 4, c0, nc, &bytes));
    std::vector<int32_t> zeros(static_cast<size_t>(m_.groups * n));
    for (int64_t g = 0; g < m_.groups; ++g) {
      for (int64_t r = r0; r < r0 + n; ++r) {
        const int slot = awq ? kAwqNibble[r % 8] : static_cast<int>(r % pf);
        uint32_t z = (Word(bytes, g * nc + r / pf - c0) >> (slot * m_.bits)) & mask;
        if (m_.v1_zeros) z = (z + 1) & mask;
        zeros[g * n + (r - r0)] = static_cast<int32_t>(z);
      }
    }
    // The group of each input column.
    std::vector<int32_t> group(static_cast<size_t>(m_.in));
    if (awq) {
      for (int64_t i = 0; i < m_.in; ++i) group[i] = static_cast<int32_t>(i / m_.group_size);
    } else {
      SPK_RETURN_IF_ERROR(src.files.shard(m_.g_idx.shard)
                              .ReadTensorBytes(m_.g_idx.entry, 0,
                                               {reinterpret_cast<uint8_t*>(group.data()),
                                                group.size() * sizeof(int32_t)}));
      for (int64_t i = 0; i < m_.in; ++i) {
        if (group[i] < 0 || group[i] >= m_.groups) {
          return BadSourceTensor(
              src, m_.g_idx.shard, m_.g_idx.entry.name,
              fmt::format("group {} at input column {} outside [0, {}) (the scales' rows): the "
                          "weight '{}' cannot be decoded",
                          group[i], i, m_.groups, t.name));
        }
      }
    }
    // The packed codes: GPTQ [in / pf][n] words, AWQ [in][nc] words.
    if (awq) {
      SPK_RETURN_IF_ERROR(ReadColumns(src, m_.qweight, m_.in, m_.out / pf, 4, c0, nc, &bytes));
    } else {
      SPK_RETURN_IF_ERROR(ReadColumns(src, m_.qweight, m_.in / pf, m_.out, 4, r0, n, &bytes));
    }
    // Row by row: its codes, then each value from a table of the row's (group, code) values
    // (2^bits codes a group; 8-bit rows are computed value by value instead).
    const int levels = 1 << m_.bits;
    const bool table = m_.bits <= 4;
    const size_t elem = DTypeBits(t.dtype) / 8;
    std::vector<uint8_t> codes(static_cast<size_t>(m_.in));
    std::vector<float> values(static_cast<size_t>(table ? m_.groups * levels : m_.in));
    std::vector<uint8_t> lut(table ? values.size() * elem : 0);
    for (int64_t r = r0; r < r0 + n; ++r) {
      const int64_t rr = r - r0;
      if (awq) {
        const int64_t col = r / 8 - c0;
        const int shift = 4 * kAwqNibble[r % 8];
        for (int64_t i = 0; i < m_.in; ++i) codes[i] = (Word(bytes, i * nc + col) >> shift) & mask;
      } else {
        for (int64_t k = 0; k < m_.in / pf; ++k) {
          const uint32_t w = Word(bytes, k * n + rr);
          for (int j = 0; j < pf; ++j) codes[k * pf + j] = (w >> (m_.bits * j)) & mask;
        }
      }
      uint8_t* dst = out.data() + static_cast<size_t>(rr * m_.in) * elem;
      if (!table) {
        for (int64_t i = 0; i < m_.in; ++i) {
          const size_t gk = static_cast<size_t>(group[i] * n + rr);
          values[i] = static_cast<float>(codes[i] - zeros[gk]) * scales[gk];
        }
        ConvertFromFloat(t.dtype, values.data(), dst, values.size());
        continue;
      }
      for (int64_t g = 0; g < m_.groups; ++g) {
        const size_t gk = static_cast<size_t>(g * n + rr);
        for (int c = 0; c < levels; ++c) {
          values[g * levels + c] = static_cast<float>(c - zeros[gk]) * scales[gk];
        }
      }
      ConvertFromFloat(t.dtype, values.data(), lut.data(), values.size());
      if (elem == 2) {
        Gather<uint16_t>(lut.data(), group.data(), codes.data(), levels, m_.in, dst);
      } else {
        Gather<uint32_t>(lut.data(), group.data(), codes.data(), levels, m_.in, dst);
      }
    }
    return Status::Ok();
  }

 private:
  PackedModule m_;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// quantization_config[key] as an integer (the first of `keys` present), or `fallback`.
Result<int64_t> ConfigInt(const SourceCheckpoint& src, const nlohmann::ordered_json& qc,
                          std::initializer_list<const char*> keys, int64_t fallback,
                          std::string_view method) {
  for (const char* key : keys) {
    auto it = qc.find(key);
    if (it == qc.end() || it->is_null()) continue;
    if (!it->is_number_integer()) {
      return RefuseSource(
          src, fmt::format("quant_method {} with {} {} (not an integer)", method, key, it->dump()));
    }
    return it->get<int64_t>();
  }
  return fallback;
}

std::string ConfigString(const nlohmann::ordered_json& qc, const char* key) {
  auto it = qc.find(key);
  return it != qc.end() && it->is_string() ? Lower(it->get<std::string>()) : "";
}

std::string ModuleOf(std::string_view name, std::string_view suffix) {
  return std::string(name.substr(0, name.size() - suffix.size()));
}

// Checks tensor `name`'s dtype and shape; the error names its file.
Status Expect(const SourceCheckpoint& src, const ShardTensor& t,
              std::initializer_list<DType> dtypes, const std::vector<int64_t>& shape,
              std::string_view what) {
  if (std::find(dtypes.begin(), dtypes.end(), t.entry.dtype) == dtypes.end()) {
    std::vector<std::string_view> names;
    for (DType d : dtypes) names.push_back(DTypeName(d));
    return BadSourceTensor(src, t.shard, t.entry.name,
                           fmt::format("dtype {} where {} is {}", DTypeName(t.entry.dtype), what,
                                       fmt::join(names, " or ")));
  }
  if (t.entry.shape != shape) {
    return BadSourceTensor(
        src, t.shard, t.entry.name,
        fmt::format("shape [{}] where {} needs [{}]", fmt::join(t.entry.shape, ", "), what,
                    fmt::join(shape, ", ")));
  }
  return Status::Ok();
}

constexpr std::string_view kQweight = ".qweight";

// Checks a module's tensors against each other and the config; sets its in, out, groups and (AWQ)
// group_size. `m` holds its tensors.
Status CheckShapes(const SourceCheckpoint& src, bool gptq, int pf, int64_t config_group_size,
                   PackedModule* mp) {
  PackedModule& m = *mp;
  const std::vector<int64_t>& qs = m.qweight.entry.shape;
  if (m.qweight.entry.dtype != DType::kI32 || qs.size() != 2) {
    return BadSourceTensor(src, m.qweight.shard, m.qweight.entry.name,
                           fmt::format("{} [{}] where a 2-D I32 tensor of packed codes is "
                                       "expected",
                                       DTypeName(m.qweight.entry.dtype), fmt::join(qs, ", ")));
  }
  m.in = gptq ? qs[0] * pf : qs[0];
  m.out = gptq ? qs[1] : qs[1] * pf;
  const std::vector<int64_t>& ss = m.scales.entry.shape;
  m.groups = ss.size() == 2 ? ss[0] : 0;
  if (m.groups <= 0) {
    return BadSourceTensor(src, m.scales.shard, m.scales.entry.name,
                           fmt::format("shape [{}] where scales [groups, {}] are expected",
                                       fmt::join(ss, ", "), m.out));
  }
  SPK_RETURN_IF_ERROR(Expect(src, m.scales, {DType::kF16, DType::kBF16, DType::kF32},
                             {m.groups, m.out},
                             fmt::format("the scales of [{}]", fmt::join(qs, ", "))));
  if (!gptq) {
    // AWQ groups consecutive input rows: group_size from the config (-1: one group), or
    // from the shapes when the config has none.
    const int64_t gs = config_group_size > 0    ? config_group_size
                       : config_group_size == 0 ? m.in / m.groups
                                                : m.in;
    if (gs <= 0 || m.in % gs != 0 || m.groups != m.in / gs) {
      return BadSourceTensor(
          src, m.scales.shard, m.scales.entry.name,
          fmt::format("{} groups where {} input rows in groups of {} need {}", m.groups, m.in, gs,
                      gs > 0 && m.in % gs == 0 ? fmt::format("{}", m.in / gs)
                                               : std::string("whole groups")));
    }
    m.group_size = gs;
  }
  if (m.out % pf != 0) {
    return BadSourceTensor(
        src, m.qweight.shard, m.qweight.entry.name,
        fmt::format("{} outputs, not a multiple of the {} codes of a word", m.out, pf));
  }
  SPK_RETURN_IF_ERROR(Expect(src, m.qzeros, {DType::kI32}, {m.groups, m.out / pf},
                             fmt::format("the packed zeros of {} groups", m.groups)));
  if (gptq) {
    // g_idx alone places each input column (a group count the config's group_size does not
    // give is still decoded, as GPTQModel's dequantizer does).
    SPK_RETURN_IF_ERROR(
        Expect(src, m.g_idx, {DType::kI32}, {m.in}, "the group index of each input column"));
  }
  return Status::Ok();
}

Status DecodePackedSource(SourceCheckpoint* src, const PackedModule& proto, std::string_view method,
                          int64_t config_group_size) {
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < src->tensors.size(); ++i) by_name[src->tensors[i].name] = i;
  const bool gptq = proto.layout == Layout::kGptq;
  std::vector<std::string_view> consumed = {".qzeros", ".scales"};
  if (gptq) consumed.push_back(".g_idx");
  std::vector<bool> keep(src->tensors.size(), true);
  std::vector<SourceDecode> decode(src->tensors.size());
  const int pf = 32 / proto.bits;
  size_t modules = 0;
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    if (!src->tensors[i].name.ends_with(kQweight)) continue;
    const std::string module = ModuleOf(src->tensors[i].name, kQweight);
    PackedModule m = proto;
    m.qweight = {src->tensor_shard[i], src->entries[i]};
    std::array<ShardTensor*, 3> parts = {&m.qzeros, &m.scales, &m.g_idx};
    for (size_t k = 0; k < consumed.size(); ++k) {
      auto it = by_name.find(module + std::string(consumed[k]));
      if (it == by_name.end()) {
        return BadSourceTensor(
            *src, m.qweight.shard, m.qweight.entry.name,
            fmt::format("{} without its {}{}: the weight cannot be decoded; the checkpoint is "
                        "incomplete (re-download it)",
                        method, module, consumed[k]));
      }
      *parts[k] = {src->tensor_shard[it->second], src->entries[it->second]};
      keep[it->second] = false;
    }
    SPK_RETURN_IF_ERROR(CheckShapes(*src, gptq, pf, config_group_size, &m));
    TensorMeta& t = src->tensors[i];
    t = TensorMeta{module + ".weight", m.scales.entry.dtype, {m.out, m.in}, ""};
    decode[i].decoder = std::make_shared<PackedIntDecoder>(std::move(m));
    ++modules;
  }
  for (size_t i = 0; i < src->tensors.size(); ++i) {
    if (!keep[i] || decode[i].decoded()) continue;
    for (std::string_view suffix : consumed) {
      if (src->tensors[i].name.ends_with(suffix) &&
          by_name.count(ModuleOf(src->tensors[i].name, suffix) + std::string(kQweight)) == 0) {
        return BadSourceTensor(
            *src, src->tensor_shard[i], src->tensors[i].name,
            fmt::format("a {} tensor whose {}{} is not in the checkpoint", method,
                        ModuleOf(src->tensors[i].name, suffix), kQweight));
      }
    }
  }
  if (modules == 0) {
    return RefuseSource(
        *src, fmt::format("quant_method {}, but no tensor is a packed X{}", method, kQweight));
  }
  KeepSourceTensors(src, keep, std::move(decode));
  return Status::Ok();
}

Status RefuseBits(const SourceCheckpoint& src, std::string_view method, int64_t bits,
                  std::string_view decoded) {
  return RefuseSource(
      src, fmt::format("quant_method {} with bits {}: only {} are decoded", method, bits, decoded));
}

// GPTQModel's `dynamic` overrides (module pattern -> settings): one that changes the bit width
// is refused, as every module is decoded with the config's bits.
Status CheckDynamicBits(const SourceCheckpoint& src, const nlohmann::ordered_json& qc,
                        std::string_view method, int64_t bits) {
  auto dyn = qc.find("dynamic");
  if (dyn == qc.end() || !dyn->is_object()) return Status::Ok();
  for (const auto& [pattern, over] : dyn->items()) {
    if (over.is_object() && over.contains("bits") && over["bits"] != bits) {
      return RefuseSource(src, fmt::format("quant_method {} with dynamic bits {} for '{}' (the "
                                           "config's are {}): modules of other bit widths are not "
                                           "decoded",
                                           method, over["bits"].dump(), pattern, bits));
    }
  }
  return Status::Ok();
}

// GPTQModel writes the format as `format` and `checkpoint_format`; transformers as
// `checkpoint_format`. Absent: v1 ("gptq").
Result<std::string> GptqFormat(const SourceCheckpoint& src, const nlohmann::ordered_json& qc) {
  const std::string format = ConfigString(qc, "format");
  const std::string checkpoint_format = ConfigString(qc, "checkpoint_format");
  if (!format.empty() && !checkpoint_format.empty() && format != checkpoint_format) {
    return RefuseSource(src, fmt::format("quant_method gptq with format {} but checkpoint_format "
                                         "{}: which one the zeros follow is unclear",
                                         format, checkpoint_format));
  }
  std::string f = !format.empty() ? format : checkpoint_format;
  if (f.empty()) f = "gptq";
  if (f != "gptq" && f != "gptq_v2") {
    return RefuseSource(src, fmt::format("quant_method gptq with checkpoint_format {}: only gptq "
                                         "(v1) and gptq_v2 are decoded",
                                         f));
  }
  return f;
}

}  // namespace

Status DecodeGptqSource(SourceCheckpoint* src, const nlohmann::ordered_json& qc) {
  PackedModule proto;
  proto.layout = Layout::kGptq;
  SPK_ASSIGN_OR_RETURN(int64_t bits, ConfigInt(*src, qc, {"bits"}, 4, "gptq"));
  if (bits != 2 && bits != 4 && bits != 8) return RefuseBits(*src, "gptq", bits, "2, 4 and 8");
  proto.bits = static_cast<int>(bits);
  SPK_RETURN_IF_ERROR(CheckDynamicBits(*src, qc, "gptq", bits));
  SPK_ASSIGN_OR_RETURN(std::string format, GptqFormat(*src, qc));
  proto.v1_zeros = format == "gptq";
  return DecodePackedSource(src, proto, "gptq", 0);
}

Status DecodeAwqSource(SourceCheckpoint* src, const nlohmann::ordered_json& qc) {
  PackedModule proto;
  proto.layout = Layout::kAwq;
  SPK_ASSIGN_OR_RETURN(int64_t bits, ConfigInt(*src, qc, {"bits", "w_bit"}, 4, "awq"));
  if (bits != 4) return RefuseBits(*src, "awq", bits, "4");
  SPK_RETURN_IF_ERROR(CheckDynamicBits(*src, qc, "awq", bits));
  SPK_ASSIGN_OR_RETURN(int64_t group_size,
                       ConfigInt(*src, qc, {"group_size", "q_group_size"}, 0, "awq"));
  // AutoAWQ writes `version`; GPTQModel `version` and `format`, the same. zero_point is not read:
  // the zeros are always stored (GPTQModel writes zero_point false for its symmetric AWQ, with
  // qzeros, and its dequantize_gemm reads them).
  const std::string version = ConfigString(qc, "version"), format = ConfigString(qc, "format");
  if (!version.empty() && !format.empty() && version != format) {
    return RefuseSource(*src, fmt::format("quant_method awq with version {} but format {}: which "
                                          "layout the weights follow is unclear",
                                          version, format));
  }
  const std::string layout = !version.empty() ? version : format.empty() ? "gemm" : format;
  if (layout != "gemm") {
    return RefuseSource(*src, fmt::format("quant_method awq with version {}: only version gemm is "
                                          "decoded",
                                          layout));
  }
  return DecodePackedSource(src, proto, "awq", group_size);
}

}  // namespace spk
