#include "dequantize/dequantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>

#include "checkpoint/other_files.h"
#include "checkpoint/quant_config.h"
#include "quant/pack_quantized.h"
#include "quant/rtn.h"
#include "safetensors/checkpoint_writer.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

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
  return std::max<int64_t>(
      1, static_cast<int64_t>(kWriterBlockBytes / (4 * std::max<int64_t>(cols, 1))));
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

// Dequantizes one module in row blocks into its dense <module>.weight (the sink's tensor 0).
TensorProducer DequantizeProducer(const PackedModuleReader& module) {
  const int64_t step = RowsPerBlock(module.cols());
  const uint64_t row_bytes = static_cast<uint64_t>(module.cols()) * DTypeBits(module.dtype()) / 8;
  TensorProducer p;
  p.blocks = static_cast<size_t>((module.rows() + step - 1) / step);
  p.write_block = [&module, step, row_bytes](size_t b, const TensorSink& out) -> Status {
    const int64_t r0 = static_cast<int64_t>(b) * step;
    PackedModuleReader::RowBlock block;
    SPK_RETURN_IF_ERROR(module.ReadRows(r0, std::min(step, module.rows() - r0), &block));
    return out.Write(0, static_cast<uint64_t>(r0) * row_bytes, block.bytes);
  };
  return p;
}

// config.json as it was before quantize: without everything quantize added, the scheme (also
// inside a speculators draft's transformer_layer_config) and its own provenance record.
std::string DenseConfig(const SourceCheckpoint& src) {
  nlohmann::ordered_json config = src.config.json;
  config.erase("quantization_config");
  config.erase("sparkulator");
  if (auto layer = config.find("transformer_layer_config");
      layer != config.end() && layer->is_object()) {
    layer->erase("quantization_config");
  }
  return config.dump(2) + "\n";
}

}  // namespace

Result<DequantizeSummary> DequantizeCheckpoint(const DequantizeOptions& options, FileSystem* fs) {
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint src, OpenSourceCheckpoint(fs, options.source));
  if (!src.config.has_quantization_config) {
    return Status::InvalidInput(fmt::format(
        "{}/config.json has no quantization_config: the checkpoint is already dense", src.dir));
  }
  SPK_ASSIGN_OR_RETURN(CheckpointScheme scheme,
                       ReadableSchemeFromConfig(src.dir + "/config.json", src.config));
  DequantizeSummary summary;
  summary.source_dir = src.dir;
  summary.destination = options.destination;
  summary.warnings = src.files.warnings();

  CheckpointWriterOptions write = CheckpointWriterOptions::For(
      options.destination, options.force, options.threads, options.durability, src.files.sharded());
  write.cancel = options.cancel;
  CheckpointWriter writer(fs, write);
  for (const std::string& file : src.files.shard_files()) writer.AddShard(file);
  // weight_packed becomes <module>.weight, its aux tensors go away, every other tensor is copied.
  // A deque keeps each reader where its producer points while more are added.
  std::deque<PackedModuleReader> modules;
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    const TensorMeta& t = src.tensors[i];
    const size_t shard = src.tensor_shard[i];
    if (t.name.ends_with(kPacked)) {
      std::string module = t.name.substr(0, t.name.size() - kPacked.size());
      SPK_ASSIGN_OR_RETURN(PackedModuleReader reader,
                           PackedModuleReader::Open(src, module, scheme));
      modules.push_back(std::move(reader));
      const PackedModuleReader& m = modules.back();
      writer.AddTensors(shard, {{module + ".weight", m.dtype(), {m.rows(), m.cols()}}},
                        DequantizeProducer(m));
      ++summary.dequantized_modules;
    } else if (!IsQuantAux(*scheme.scheme->codec, t.name) ||
               !src.files.Find(ModuleOfAux(t.name) + std::string(kPacked))) {
      const SafetensorsReader& reader = src.files.shard(shard);
      writer.AddTensors(shard, {{t.name, t.dtype, t.shape}},
                        CopyTensorProducer(reader, *reader.header().Find(t.name)));
      ++summary.copied_tensors;
    }
  }
  writer.AddFile("config.json", DenseConfig(src));
  SPK_ASSIGN_OR_RETURN(summary.copied_files,
                       CopyOtherFiles(fs, src.dir, &writer, &summary.warnings));
  SPK_RETURN_IF_ERROR(writer.Finish());
  summary.shards = writer.shards();
  return summary;
}

nlohmann::ordered_json DequantizeSummaryToJson(const DequantizeSummary& summary) {
  return {{"source", summary.source_dir},
          {"destination", summary.destination},
          {"dequantized_modules", summary.dequantized_modules},
          {"copied_tensors", summary.copied_tensors},
          {"shards", summary.shards},
          {"copied_files", summary.copied_files},
          {"warnings", summary.warnings}};
}

}  // namespace spk
