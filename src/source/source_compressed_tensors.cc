// The compressed-tensors source format: each quantized module's stored tensors become its dense
// `.weight`, read through the module reader that `dequantize` writes with (compressed-tensors'
// decompress, source/module_reader.h). See source/source_formats.h.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "model/quant_config.h"
#include "model/quantized_modules.h"
#include "source/module_reader.h"
#include "source/source_decode.h"
#include "source/source_formats.h"

namespace spk {
namespace {

std::string ModuleOf(const std::string& name) { return name.substr(0, name.rfind('.')); }

class CompressedTensorsDecoder : public SourceTensorDecoder {
 public:
  explicit CompressedTensorsDecoder(QuantizedModuleReader module) : module_(std::move(module)) {}

  // The reader decodes from a multiple of its row alignment (128 for FP8 blocks), so the rows
  // around the asked ones are decoded and dropped.
  Status ReadRows(const SourceCheckpoint&, const TensorMeta& t, int64_t r0, int64_t n,
                  std::span<uint8_t> out) const override {
    const uint64_t row_bytes = static_cast<uint64_t>(t.shape[1]) * (DTypeBits(t.dtype) / 8);
    const int64_t align = module_.row_alignment();
    const int64_t a0 = r0 / align * align;
    const int64_t a1 = std::min(module_.rows(), (r0 + n + align - 1) / align * align);
    QuantizedModuleReader::RowBlock block;
    SPK_RETURN_IF_ERROR(module_.ReadRows(a0, a1 - a0, &block));
    std::memcpy(out.data(), block.bytes.data() + static_cast<size_t>(r0 - a0) * row_bytes,
                static_cast<size_t>(n) * row_bytes);
    return Status::Ok();
  }

 private:
  QuantizedModuleReader module_;
};

}  // namespace

Status DecodeCompressedTensorsSource(SourceCheckpoint* src, const nlohmann::ordered_json&) {
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
      decode[i].decoder = std::make_shared<CompressedTensorsDecoder>(std::move(reader));
    } else if (IsQuantAuxName(codec, t.name) &&
               src->files.Find(ModuleOf(t.name) + std::string(ValueSuffix(codec)))) {
      keep[i] = false;  // read by its module's reader
    }
  }
  KeepSourceTensors(src, keep, std::move(decode));
  return Status::Ok();
}

}  // namespace spk
