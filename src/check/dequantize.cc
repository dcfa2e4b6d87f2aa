#include "check/dequantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "checkpoint/quant_config.h"
#include "io/atomic_dir.h"
#include "io/fs_util.h"
#include "quant/pack_quantized.h"
#include "quant/rtn.h"
#include "quantize/quantize.h"
#include "safetensors/index.h"
#include "safetensors/writer.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

constexpr uint64_t kBlockBytes = 4u << 20;
constexpr std::string_view kPacked = kPackedSuffix;

// A tensor the codec stores beside weight_packed (weight_scale, weight_shape, ...).
bool IsQuantAux(const WeightCodec& codec, const std::string& name) {
  for (std::string_view suffix : codec.suffixes()) {
    if (suffix != kPackedSuffix && name.ends_with(suffix)) return true;
  }
  return false;
}

std::string ModuleOfAux(const std::string& name) { return name.substr(0, name.rfind('.')); }

}  // namespace

int64_t RowsPerBlock(int64_t cols) {
  return std::max<int64_t>(1, static_cast<int64_t>(kBlockBytes / (4 * std::max<int64_t>(cols, 1))));
}

Result<PackedModuleReader> PackedModuleReader::Open(const SourceCheckpoint& ckpt,
                                                    const std::string& module,
                                                    const CheckpointScheme& scheme) {
  PackedModuleReader r;
  r.module_ = module;
  r.params_ = scheme.params;
  r.codec_ = scheme.scheme->codec;
  const QuantParams& params = r.params_;
  auto find = [&](std::string_view suffix) -> Result<SafetensorsCheckpoint::Located> {
    auto located = ckpt.files.Find(module + std::string(suffix));
    if (!located) {
      return Status::InvalidInput(
          fmt::format("{}: module '{}' has no '{}{}' tensor; run "
                      "`sparkulator check` on it",
                      ckpt.dir, module, module, suffix));
    }
    return *located;
  };
  // The original shape comes first: the codec derives every other tensor's shape from it.
  SPK_ASSIGN_OR_RETURN(auto shape, find(kShapeSuffix));
  if (shape.entry->dtype != DType::kI64 || shape.entry->shape != std::vector<int64_t>{2}) {
    return Status::InvalidInput(
        fmt::format("{}: '{}.weight_shape' must be I64 [2]", ckpt.dir, module));
  }
  int64_t dims[2];
  SPK_RETURN_IF_ERROR(
      ckpt.files.shard(shape.shard)
          .ReadTensor(*shape.entry, {reinterpret_cast<uint8_t*>(dims), sizeof dims}));
  r.rows_ = dims[0];
  r.cols_ = dims[1];
  SPK_ASSIGN_OR_RETURN(auto scale, find(kScaleSuffix));
  r.dtype_ = scale.entry->dtype;
  if (Status valid = r.codec_->Validate(params, r.dtype_, r.rows_, r.cols_); !valid.ok()) {
    return Status::InvalidInput(fmt::format(
        "{}: module '{}': weight_shape [{}, {}] with group size {} and scale dtype {} is not "
        "a valid {} weight: {}",
        ckpt.dir, module, r.rows_, r.cols_, params.group_size, DTypeName(r.dtype_),
        r.codec_->format(), valid.message()));
  }
  for (const StoredTensor& want : r.codec_->Tensors(params, r.dtype_, r.rows_, r.cols_)) {
    SPK_ASSIGN_OR_RETURN(auto got, find(want.suffix));
    if (got.entry->dtype != want.dtype || got.entry->shape != want.shape) {
      return Status::InvalidInput(fmt::format(
          "{}: module '{}': {} is {} {}, but weight_shape [{}, {}] needs {} {}; run `sparkulator "
          "check` on it",
          ckpt.dir, module, want.suffix.substr(1), DTypeName(got.entry->dtype),
          ShapeToString(got.entry->shape), r.rows_, r.cols_, DTypeName(want.dtype),
          ShapeToString(want.shape)));
    }
    switch (want.role) {
      case TensorRole::kPacked:
        r.packed_reader_ = &ckpt.files.shard(got.shard);
        r.packed_ = got.entry;
        r.words_ = want.shape[1];
        break;
      case TensorRole::kScale:
        r.scale_reader_ = &ckpt.files.shard(got.shard);
        r.scale_ = got.entry;
        r.groups_ = want.shape[1];
        break;
      case TensorRole::kShape:
        break;
      case TensorRole::kZeroPoint: {
        std::vector<int32_t> packed_zp(static_cast<size_t>(want.shape[0] * want.shape[1]));
        SPK_RETURN_IF_ERROR(ckpt.files.shard(got.shard).ReadTensor(
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

Status PackedModuleReader::ReadRows(int64_t r0, int64_t n, RowBlock* block) const {
  const uint64_t elem = DTypeBits(dtype_) / 8;
  std::vector<int32_t> packed(static_cast<size_t>(n * words_));
  SPK_RETURN_IF_ERROR(packed_reader_->ReadTensorBytes(
      *packed_, static_cast<uint64_t>(r0 * words_) * 4,
      {reinterpret_cast<uint8_t*>(packed.data()), packed.size() * 4}));
  std::vector<uint8_t> scales(static_cast<size_t>(n * groups_) * elem);
  SPK_RETURN_IF_ERROR(
      scale_reader_->ReadTensorBytes(*scale_, static_cast<uint64_t>(r0 * groups_) * elem, scales));
  block->scales.resize(static_cast<size_t>(n * groups_));
  ConvertToFloat(dtype_, scales.data(), block->scales.data(), block->scales.size());
  const int32_t* zp = nullptr;
  block->zero_points.clear();
  if (!zero_points_.empty()) {
    zp = zero_points_.data() + r0 * groups_;
    block->zero_points.assign(zp, zp + n * groups_);
  }
  block->bytes.resize(static_cast<size_t>(n * cols_) * elem);
  RowBlockBytes in;
  in[TensorRole::kPacked] = reinterpret_cast<uint8_t*>(packed.data());
  in[TensorRole::kScale] = scales.data();
  in[TensorRole::kZeroPoint] = reinterpret_cast<uint8_t*>(const_cast<int32_t*>(zp));
  Status s = codec_->DequantizeRows(params_, dtype_, in, 0.0f, n, cols_, block->bytes.data());
  if (!s.ok()) {
    return Status(s.code(), fmt::format("module '{}': rows {}..{}: {}", module_, r0, r0 + n - 1,
                                        s.message()));
  }
  return Status::Ok();
}

namespace {

struct OutputTensor {
  TensorSpec spec;
  std::string source;  // tensor to copy, or the module to dequantize
  bool dequantize = false;
};

Status CopyTensorBytes(const SafetensorsReader& reader, const TensorEntry& entry, WritableFile& out,
                       uint64_t offset) {
  for (uint64_t begin = 0; begin < entry.nbytes(); begin += kBlockBytes) {
    std::vector<uint8_t> buf(std::min(kBlockBytes, entry.nbytes() - begin));
    SPK_RETURN_IF_ERROR(reader.ReadTensorBytes(entry, begin, buf));
    SPK_RETURN_IF_ERROR(out.WriteAt(offset + begin, buf));
  }
  return Status::Ok();
}

Status WriteDequantized(const PackedModuleReader& module, WritableFile& out, uint64_t offset) {
  const int64_t step = RowsPerBlock(module.cols());
  const uint64_t row_bytes = static_cast<uint64_t>(module.cols()) * DTypeBits(module.dtype()) / 8;
  PackedModuleReader::RowBlock block;
  for (int64_t r0 = 0; r0 < module.rows(); r0 += step) {
    int64_t n = std::min(step, module.rows() - r0);
    SPK_RETURN_IF_ERROR(module.ReadRows(r0, n, &block));
    SPK_RETURN_IF_ERROR(out.WriteAt(offset + static_cast<uint64_t>(r0) * row_bytes, block.bytes));
  }
  return Status::Ok();
}

}  // namespace

Result<DequantizeSummary> DequantizeCheckpoint(const DequantizeOptions& options, FileSystem* fs) {
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint src, OpenSourceCheckpoint(fs, options.source));
  if (!src.config.has_quantization_config) {
    return Status::InvalidInput(fmt::format(
        "{}/config.json has no quantization_config: the checkpoint is already dense", src.dir));
  }
  SPK_ASSIGN_OR_RETURN(CheckpointScheme scheme,
                       SchemeFromConfig(src.dir + "/config.json", src.config));
  DequantizeSummary summary;
  summary.source_dir = src.dir;
  summary.destination = options.destination;
  summary.warnings = src.files.warnings();

  // Plan every output shard: weight_packed becomes <module>.weight, its aux tensors go away.
  std::vector<std::vector<OutputTensor>> shards(src.files.num_shards());
  std::vector<SafetensorsLayout> layouts;
  std::vector<PackedModuleReader> modules;
  std::map<std::string, size_t> module_index;
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    const TensorMeta& t = src.tensors[i];
    auto& shard = shards[src.tensor_shard[i]];
    if (t.name.ends_with(kPacked)) {
      std::string module = t.name.substr(0, t.name.size() - kPacked.size());
      SPK_ASSIGN_OR_RETURN(auto reader, PackedModuleReader::Open(src, module, scheme));
      shard.push_back(
          {{module + ".weight", reader.dtype(), {reader.rows(), reader.cols()}}, module, true});
      module_index[module] = modules.size();
      modules.push_back(std::move(reader));
    } else if (!IsQuantAux(*scheme.scheme->codec, t.name) ||
               !src.files.Find(ModuleOfAux(t.name) + std::string(kPacked))) {
      shard.push_back({{t.name, t.dtype, t.shape}, t.name, false});
    }
  }
  for (auto& shard : shards) {
    std::vector<TensorSpec> specs;
    for (const OutputTensor& o : shard) specs.push_back(o.spec);
    SortLikeReference(specs);
    SPK_ASSIGN_OR_RETURN(auto layout, SafetensorsLayout::Plan(std::move(specs)));
    layouts.push_back(std::move(layout));
  }

  SPK_ASSIGN_OR_RETURN(AtomicOutputDir out_dir,
                       AtomicOutputDir::Create(options.destination, options.force));
  ShardIndex index;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string& file = src.files.shard_files()[s];
    SPK_ASSIGN_OR_RETURN(auto out, fs->CreateForWrite(out_dir.temp_path() + "/" + file));
    SPK_RETURN_IF_ERROR(WriteSafetensorsHeader(*out, layouts[s]));
    for (const OutputTensor& o : shards[s]) {
      SPK_ASSIGN_OR_RETURN(uint64_t offset, layouts[s].AbsoluteOffset(o.spec.name));
      index.weight_map[o.spec.name] = file;
      index.total_size += layouts[s].TensorBytes(o.spec.name);
      if (o.dequantize) {
        SPK_RETURN_IF_ERROR(WriteDequantized(modules[module_index[o.source]], *out, offset));
        ++summary.dequantized_modules;
      } else {
        auto located = src.files.Find(o.source);
        SPK_RETURN_IF_ERROR(
            CopyTensorBytes(src.files.shard(located->shard), *located->entry, *out, offset));
        ++summary.copied_tensors;
      }
    }
    SPK_RETURN_IF_ERROR(out->Sync());
    SPK_RETURN_IF_ERROR(out->Close());
  }
  if (src.files.sharded()) {
    SPK_RETURN_IF_ERROR(WriteWholeFile(out_dir.temp_path() + "/" + std::string(kShardIndexFileName),
                                       SerializeShardIndex(index)));
  }
  nlohmann::ordered_json config = src.config.json;
  // Everything quantize added: the scheme (also inside a speculators draft's
  // transformer_layer_config) and its own provenance record.
  config.erase("quantization_config");
  config.erase("sparkulator");
  if (auto layer = config.find("transformer_layer_config");
      layer != config.end() && layer->is_object()) {
    layer->erase("quantization_config");
  }
  SPK_RETURN_IF_ERROR(WriteWholeFile(out_dir.temp_path() + "/config.json", config.dump(2) + "\n"));
  SPK_ASSIGN_OR_RETURN(summary.copied_files,
                       CopyOtherFiles(src.dir, out_dir.temp_path(), &summary.warnings));
  SPK_RETURN_IF_ERROR(out_dir.Commit());
  summary.shards = shards.size();
  return summary;
}

}  // namespace spk
