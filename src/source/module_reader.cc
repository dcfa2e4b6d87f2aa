#include "source/module_reader.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/quantized_modules.h"
#include "quant/float_formats.h"
#include "quant/pack_quantized.h"
#include "quant/rtn.h"
#include "safetensors/checkpoint_writer.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

using Located = SafetensorsCheckpoint::Located;

uint64_t RowBytes(const TensorEntry& e) {
  uint64_t elements = 1;
  for (size_t d = 1; d < e.shape.size(); ++d) elements *= static_cast<uint64_t>(e.shape[d]);
  return elements * DTypeBits(e.dtype) / 8;
}

}  // namespace

int64_t RowsPerBlock(int64_t cols, int64_t alignment) {
  const int64_t rows = std::max<int64_t>(
      1, static_cast<int64_t>(kWriterBlockBytes / (4 * std::max<int64_t>(cols, 1))));
  return std::max(alignment, rows / alignment * alignment);
}

Result<QuantizedModuleReader> QuantizedModuleReader::Open(const SourceCheckpoint& ckpt,
                                                          const std::string& module,
                                                          const CheckpointScheme& scheme) {
  QuantizedModuleReader r;
  r.module_ = module;
  r.params_ = scheme.params;
  r.codec_ = scheme.scheme->codec;
  const QuantParams& params = r.params_;
  auto find = [&](std::string_view suffix) -> Result<Located> {
    auto located = ckpt.files.Find(module + std::string(suffix));
    if (!located) {
      return Status::InvalidInput(
          fmt::format("{}: module '{}' has no '{}{}' tensor; run `sparkulator check` on it",
                      ckpt.dir, module, module, suffix));
    }
    return *located;
  };
  SPK_ASSIGN_OR_RETURN(Located scale, find(kScaleSuffix));
  r.scale_dtype_ = scale.entry->dtype;
  r.weight_dtype_ = WeightDTypeOfScales(r.scale_dtype_);
  const std::string value_suffix(r.codec_->suffixes().front());
  SPK_ASSIGN_OR_RETURN(Located values, find(value_suffix));
  if (auto shape = ckpt.files.Find(module + std::string(kShapeSuffix))) {
    // pack-quantized records the original shape; every other tensor's shape follows from it.
    int64_t dims[2] = {0, 0};
    if (shape->entry->dtype != DType::kI64 || shape->entry->shape != std::vector<int64_t>{2}) {
      return Status::InvalidInput(
          fmt::format("{}: '{}.weight_shape' must be I64 [2]", ckpt.dir, module));
    }
    SPK_RETURN_IF_ERROR(
        ckpt.files.shard(shape->shard)
            .ReadTensor(*shape->entry, {reinterpret_cast<uint8_t*>(dims), sizeof dims}));
    r.rows_ = dims[0];
    r.cols_ = dims[1];
  } else if (auto dims =
                 WeightDimsFromValues(*r.codec_, params, r.weight_dtype_, values.entry->shape)) {
    std::tie(r.rows_, r.cols_) = *dims;
  } else {
    return Status::InvalidInput(fmt::format(
        "{}: module '{}': {}{} is {} {}, which no {} weight with group size {} stores; run "
        "`sparkulator check` on it",
        ckpt.dir, module, module, value_suffix, DTypeName(values.entry->dtype),
        ShapeToString(values.entry->shape), r.codec_->format(), params.group_size));
  }
  if (Status valid = r.codec_->Validate(params, r.weight_dtype_, r.rows_, r.cols_); !valid.ok()) {
    return Status::InvalidInput(fmt::format(
        "{}: module '{}': a [{}, {}] weight with group size {} and scale dtype {} is not a valid "
        "{} weight: {}",
        ckpt.dir, module, r.rows_, r.cols_, params.group_size, DTypeName(r.scale_dtype_),
        r.codec_->format(), valid.message()));
  }
  r.out_dtype_ = r.codec_->DequantizedDType(r.weight_dtype_);
  for (const StoredTensor& want : r.codec_->Tensors(params, r.weight_dtype_, r.rows_, r.cols_)) {
    SPK_ASSIGN_OR_RETURN(Located got, find(want.suffix));
    if (got.entry->dtype != want.dtype || got.entry->shape != want.shape) {
      return Status::InvalidInput(fmt::format(
          "{}: module '{}': {} is {} {}, but a [{}, {}] weight needs {} {}; run `sparkulator "
          "check` on it",
          ckpt.dir, module, want.suffix.substr(1), DTypeName(got.entry->dtype),
          ShapeToString(got.entry->shape), r.rows_, r.cols_, DTypeName(want.dtype),
          ShapeToString(want.shape)));
    }
    const SafetensorsReader& reader = ckpt.files.shard(got.shard);
    const RowTensor rows{&reader, got.entry, want.weight_rows_per_row, RowBytes(*got.entry)};
    switch (want.role) {
      case TensorRole::kPacked:
        r.values_ = rows;
        break;
      case TensorRole::kScale:
        r.scales_ = rows;
        r.groups_ = want.shape[1];
        break;
      case TensorRole::kShape:
        break;
      case TensorRole::kGlobalScale:
        SPK_RETURN_IF_ERROR(reader.ReadTensor(
            *got.entry, {reinterpret_cast<uint8_t*>(&r.global_scale_), sizeof r.global_scale_}));
        break;
      case TensorRole::kZeroPoint: {
        std::vector<int32_t> packed_zp(static_cast<size_t>(want.shape[0] * want.shape[1]));
        SPK_RETURN_IF_ERROR(reader.ReadTensor(
            *got.entry, {reinterpret_cast<uint8_t*>(packed_zp.data()), packed_zp.size() * 4}));
        r.zero_points_.resize(static_cast<size_t>(r.rows_ * want.shape[1]));
        UnpackZeroPoints(params.bits, packed_zp.data(), r.rows_, want.shape[1],
                         r.zero_points_.data());
        break;
      }
    }
  }
  return r;
}

// The stored rows of `t` that weight rows [r0, r0 + n) use.
Status QuantizedModuleReader::ReadStored(const RowTensor& t, int64_t r0, int64_t n,
                                         std::vector<uint8_t>* out) const {
  const int64_t first = r0 / t.weight_rows_per_row;
  const int64_t last = (r0 + n - 1) / t.weight_rows_per_row;
  out->resize(static_cast<size_t>(last - first + 1) * t.row_bytes);
  return t.reader->ReadTensorBytes(*t.entry, static_cast<uint64_t>(first) * t.row_bytes, *out);
}

// The scale a stored scale element stands for, as the decompressor applies it.
float QuantizedModuleReader::EffectiveScale(const uint8_t* stored) const {
  switch (scale_dtype_) {
    case DType::kF8E4M3:
      return E4M3ToFloat(*stored) / global_scale_;  // NVFP4: scale / weight_global_scale
    case DType::kU8:
      return MxDecompressedScale(*stored);  // E8M0
    default: {
      float scale;
      ConvertToFloat(scale_dtype_, stored, &scale, 1);
      return scale;
    }
  }
}

Status QuantizedModuleReader::ReadRows(int64_t r0, int64_t n, RowBlock* block) const {
  std::vector<uint8_t> values, scales;
  SPK_RETURN_IF_ERROR(ReadStored(values_, r0, n, &values));
  SPK_RETURN_IF_ERROR(ReadStored(scales_, r0, n, &scales));
  const size_t scale_bytes = DTypeBits(scale_dtype_) / 8;
  const int64_t per_row = scales_.weight_rows_per_row;
  block->scales.resize(static_cast<size_t>(n * groups_));
  for (int64_t r = 0; r < n; ++r) {
    const int64_t stored_row = (r0 + r) / per_row - r0 / per_row;
    for (int64_t g = 0; g < groups_; ++g) {
      block->scales[r * groups_ + g] =
          EffectiveScale(scales.data() + (stored_row * groups_ + g) * scale_bytes);
    }
  }
  const int32_t* zp = nullptr;
  block->zero_points.clear();
  if (!zero_points_.empty()) {
    zp = zero_points_.data() + r0 * groups_;
    block->zero_points.assign(zp, zp + n * groups_);
  }
  block->bytes.resize(static_cast<size_t>(n * cols_) * DTypeBits(out_dtype_) / 8);
  RowBlockBytes in;
  in[TensorRole::kPacked] = values.data();
  in[TensorRole::kScale] = scales.data();
  in[TensorRole::kZeroPoint] = reinterpret_cast<uint8_t*>(const_cast<int32_t*>(zp));
  Status s = codec_->DequantizeRows(params_, weight_dtype_, in, global_scale_, n, cols_,
                                    block->bytes.data());
  if (!s.ok()) {
    return Status(s.code(), fmt::format("module '{}': rows {}..{}: {}", module_, r0, r0 + n - 1,
                                        s.message()));
  }
  return Status::Ok();
}

}  // namespace spk
