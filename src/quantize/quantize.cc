#include "quantize/quantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <vector>

#include "base/parallel.h"
#include "base/version.h"
#include "checkpoint/global_scale_sets.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/source.h"
#include "io/atomic_dir.h"
#include "io/fs_util.h"
#include "quant/float_formats.h"
#include "quant/rtn.h"
#include "quant/scheme.h"
#include "safetensors/index.h"
#include "safetensors/writer.h"

namespace spk {
namespace {

// Source bytes per work item: large enough to amortize a pread, small enough that workers x block
// stays far below the memory budget.
constexpr uint64_t kBlockBytes = 4u << 20;
// Cap on the bytes all workers hold at once (a source block plus its packed output and scales,
// about 1.5 blocks each), so that peak memory stays far below the 384 MiB budget on machines with
// many cores, whatever --threads says and whatever the checkpoint's size.
constexpr uint64_t kMaxBytesInFlight = 192u << 20;
constexpr int kMaxWorkers = static_cast<int>(kMaxBytesInFlight / (kBlockBytes * 3 / 2));

// An output tensor is a copied source tensor, or one of the tensors the scheme's codec stores for
// a quantized weight (quant/codec.h).
struct OutputTensor {
  TensorSpec spec;
  size_t source_index;             // into SourceCheckpoint::tensors
  std::optional<TensorRole> role;  // nullopt: copied as it is
};

struct OutputShard {
  std::string file;
  std::vector<OutputTensor> tensors;  // in the order the reference writer lays them out
  SafetensorsLayout layout;
};

std::string ModuleOf(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string_view(".weight").size());
}

// The scheme and its parameters, as the options chose them.
struct SchemeChoice {
  const QuantScheme* scheme;
  QuantParams params;
};

// The tensors that replace one quantized weight, as the scheme's codec stores them (docs/formats.md
// section 2).
std::vector<OutputTensor> QuantizedTensors(const TensorMeta& t, size_t index,
                                           const SchemeChoice& choice) {
  std::string m = ModuleOf(t.name);
  std::vector<OutputTensor> out;
  for (StoredTensor& st :
       choice.scheme->codec->Tensors(choice.params, t.dtype, t.shape[0], t.shape[1])) {
    out.push_back({{m + std::string(st.suffix), st.dtype, std::move(st.shape)}, index, st.role});
  }
  return out;
}

Result<std::vector<OutputShard>> PlanOutputShards(const SourceCheckpoint& src,
                                                  const QuantPlan& plan,
                                                  const SchemeChoice& choice) {
  std::vector<OutputShard> shards(src.files.shard_files().size());
  for (size_t s = 0; s < shards.size(); ++s) shards[s].file = src.files.shard_files()[s];
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    OutputShard& shard = shards[src.tensor_shard[i]];
    const TensorMeta& t = src.tensors[i];
    if (plan.tensors[i].action == TensorAction::kQuantize) {
      for (OutputTensor& o : QuantizedTensors(t, i, choice)) {
        shard.tensors.push_back(std::move(o));
      }
    } else {
      shard.tensors.push_back({{t.name, t.dtype, t.shape}, i, std::nullopt});
    }
  }
  for (OutputShard& shard : shards) {
    std::vector<TensorSpec> specs;
    for (const OutputTensor& o : shard.tensors) specs.push_back(o.spec);
    SortLikeReference(specs);
    // Reorder the output tensors to match the layout order.
    std::vector<OutputTensor> ordered;
    for (const TensorSpec& spec : specs) {
      auto it = std::find_if(shard.tensors.begin(), shard.tensors.end(),
                             [&](const OutputTensor& o) { return o.spec.name == spec.name; });
      ordered.push_back(std::move(*it));
    }
    shard.tensors = std::move(ordered);
    SPK_ASSIGN_OR_RETURN(shard.layout, SafetensorsLayout::Plan(std::move(specs)));
  }
  return shards;
}

struct WriteContext {
  const SourceCheckpoint* src;
  const SchemeChoice* choice;
  int threads;
  Progress* progress;
  const std::atomic<bool>* cancel;
  QuantMethod method = QuantMethod::kRtn;
  Durability durability = Durability::kSynced;
  std::map<size_t, float> global_scales;  // source tensor index -> weight_global_scale (NVFP4)
};

// Writes one block at its offset and, when the output must end up on disk, starts its writeback
// at once: the disk then works while later blocks are computed, instead of all at the final fsync.
Status WriteBlock(const WriteContext& ctx, WritableFile& out, uint64_t offset,
                  std::span<const uint8_t> bytes) {
  SPK_RETURN_IF_ERROR(out.WriteAt(offset, bytes));
  if (ctx.durability == Durability::kSynced) out.StartWriteback(offset, bytes.size());
  return Status::Ok();
}

Status CopyTensor(const WriteContext& ctx, const TensorEntry& entry,
                  const SafetensorsReader& reader, WritableFile& out, uint64_t offset) {
  uint64_t total = entry.nbytes();
  size_t blocks = static_cast<size_t>((total + kBlockBytes - 1) / kBlockBytes);
  return ParallelFor(
      ctx.threads, blocks,
      [&](size_t b) -> Status {
        uint64_t begin = b * kBlockBytes;
        std::vector<uint8_t> buf(std::min(kBlockBytes, total - begin));
        SPK_RETURN_IF_ERROR(reader.ReadTensorBytes(entry, begin, buf));
        SPK_RETURN_IF_ERROR(WriteBlock(ctx, out, offset + begin, buf));
        ctx.progress->Advance(buf.size());
        return Status::Ok();
      },
      ctx.cancel);
}

// Where each of a quantized weight's stored tensors starts in the output file, by role.
class QuantizedOffsets {
 public:
  uint64_t& operator[](TensorRole role) { return at_[static_cast<size_t>(role)]; }
  uint64_t operator[](TensorRole role) const { return at_[static_cast<size_t>(role)]; }

 private:
  std::array<uint64_t, kTensorRoleCount> at_{};
};

// Bytes of one stored row of `t` (its shape past the first dimension).
uint64_t StoredRowBytes(const StoredTensor& t) {
  uint64_t n = DTypeBits(t.dtype) / 8;
  for (size_t d = 1; d < t.shape.size(); ++d) n *= static_cast<uint64_t>(t.shape[d]);
  return n;
}

// Source rows per work item: about kBlockBytes, a multiple of the codec's row alignment.
int64_t RowsPerBlock(const WeightCodec& codec, uint64_t row_bytes) {
  const int64_t align = codec.RowAlignment();
  const int64_t rows = std::max<int64_t>(1, kBlockBytes / std::max<uint64_t>(row_bytes, 1));
  return std::max(align, rows / align * align);
}

Status QuantizeTensor(const WriteContext& ctx, const TensorEntry& entry,
                      const SafetensorsReader& reader, WritableFile& out,
                      const QuantizedOffsets& at, float global_scale) {
  const QuantParams& qp = ctx.choice->params;
  const WeightCodec& codec = *ctx.choice->scheme->codec;
  const int64_t rows = entry.shape[0], cols = entry.shape[1];
  const uint64_t row_bytes = static_cast<uint64_t>(cols) * (DTypeBits(entry.dtype) / 8);
  const std::vector<StoredTensor> stored = codec.Tensors(qp, entry.dtype, rows, cols);
  const StoredTensor* zp_tensor = FindRole(stored, TensorRole::kZeroPoint);
  const int64_t groups = zp_tensor ? zp_tensor->shape[1] : 0;
  const int64_t rows_per_block = RowsPerBlock(codec, row_bytes);
  const size_t blocks = static_cast<size_t>((rows + rows_per_block - 1) / rows_per_block);
  std::vector<int32_t> zero_points(static_cast<size_t>(rows * groups));

  Status s = ParallelFor(
      ctx.threads, blocks,
      [&](size_t b) -> Status {
        int64_t r0 = static_cast<int64_t>(b) * rows_per_block;
        int64_t n = std::min(rows_per_block, rows - r0);
        std::vector<uint8_t> weight(static_cast<size_t>(n) * row_bytes);
        SPK_RETURN_IF_ERROR(reader.ReadTensorBytes(entry, r0 * row_bytes, weight));
        // One buffer per row-wise stored tensor, holding this block's rows of it.
        std::vector<std::vector<uint8_t>> parts(stored.size());
        RowBlockBytes q;
        for (size_t i = 0; i < stored.size(); ++i) {
          const int64_t per_row = stored[i].weight_rows_per_row;
          if (per_row == 0) continue;
          parts[i].resize(
              static_cast<size_t>((n + per_row - 1) / per_row * StoredRowBytes(stored[i])));
          q[stored[i].role] = parts[i].data();
        }
        if (zp_tensor)
          q[TensorRole::kZeroPoint] = reinterpret_cast<uint8_t*>(zero_points.data() + r0 * groups);
        Status qs = codec.QuantizeRows(qp, ctx.method, entry.dtype, weight.data(), n, cols,
                                       global_scale, q);
        if (!qs.ok()) {
          return Status(qs.code(), fmt::format("{}: tensor '{}': rows {}..{}: {}", reader.path(),
                                               entry.name, r0, r0 + n - 1, qs.message()));
        }
        for (size_t i = 0; i < stored.size(); ++i) {
          if (parts[i].empty()) continue;
          const uint64_t first_row = static_cast<uint64_t>(r0 / stored[i].weight_rows_per_row);
          SPK_RETURN_IF_ERROR(WriteBlock(
              ctx, out, at[stored[i].role] + first_row * StoredRowBytes(stored[i]), parts[i]));
        }
        ctx.progress->Advance(weight.size());
        return Status::Ok();
      },
      ctx.cancel);
  SPK_RETURN_IF_ERROR(s);
  if (FindRole(stored, TensorRole::kShape) != nullptr) {
    int64_t shape[2] = {rows, cols};
    SPK_RETURN_IF_ERROR(
        out.WriteAt(at[TensorRole::kShape], {reinterpret_cast<const uint8_t*>(shape), 16}));
  }
  if (FindRole(stored, TensorRole::kGlobalScale) != nullptr) {
    SPK_RETURN_IF_ERROR(out.WriteAt(at[TensorRole::kGlobalScale],
                                    {reinterpret_cast<const uint8_t*>(&global_scale), 4}));
  }
  if (zp_tensor == nullptr) return Status::Ok();
  // Zero points pack across rows, so they are written once every row block is done.
  std::vector<int32_t> zp_packed(static_cast<size_t>(zp_tensor->shape[0] * zp_tensor->shape[1]));
  PackZeroPoints(qp.bits, zero_points.data(), rows, groups, zp_packed.data());
  return out.WriteAt(at[TensorRole::kZeroPoint],
                     {reinterpret_cast<const uint8_t*>(zp_packed.data()), zp_packed.size() * 4});
}

// The first pass of a format with global scales (NVFP4): the absolute maximum of every quantized
// weight, read block by block and never held, pooled over each fused set (q/k/v, gate/up; the
// partners may sit in other shards), as the global scale of each source tensor index.
Result<std::map<size_t, float>> ComputeGlobalScales(const WriteContext& ctx,
                                                    const QuantPlan& plan) {
  const SourceCheckpoint& src = *ctx.src;
  std::vector<size_t> quantized;
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    if (plan.tensors[i].action == TensorAction::kQuantize) quantized.push_back(i);
  }
  std::map<std::string, float> set_absmax;
  for (size_t i : quantized) {
    const SafetensorsReader& reader = src.files.shard(src.tensor_shard[i]);
    const TensorEntry& entry = *reader.header().Find(src.tensors[i].name);
    const uint64_t total = entry.nbytes();
    const size_t blocks = static_cast<size_t>((total + kBlockBytes - 1) / kBlockBytes);
    std::vector<float> block_max(blocks, 0.0f);
    SPK_RETURN_IF_ERROR(ParallelFor(
        ctx.threads, blocks,
        [&](size_t b) -> Status {
          const uint64_t begin = b * kBlockBytes;
          std::vector<uint8_t> buf(std::min(kBlockBytes, total - begin));
          SPK_RETURN_IF_ERROR(reader.ReadTensorBytes(entry, begin, buf));
          block_max[b] =
              AbsMaxOf(entry.dtype, buf.data(), buf.size() / (DTypeBits(entry.dtype) / 8));
          return Status::Ok();
        },
        ctx.cancel));
    float& m = set_absmax[GlobalScaleSetKey(entry.name)];
    for (float v : block_max) m = std::max(m, v);
  }
  std::map<size_t, float> scales;
  for (size_t i : quantized) {
    const TensorMeta& t = src.tensors[i];
    scales[i] = NvFp4GlobalScale(set_absmax[GlobalScaleSetKey(t.name)], t.dtype);
  }
  return scales;
}

Status WriteShard(const WriteContext& ctx, const OutputShard& shard, FileSystem* fs,
                  const std::string& path) {
  SPK_ASSIGN_OR_RETURN(auto out, fs->CreateForWrite(path));
  SPK_RETURN_IF_ERROR(WriteSafetensorsHeader(*out, shard.layout));
  const SourceCheckpoint& src = *ctx.src;
  for (const OutputTensor& o : shard.tensors) {
    // A quantized weight is written once, when its packed tensor comes up.
    if (o.role && *o.role != TensorRole::kPacked) continue;
    const TensorMeta& meta = src.tensors[o.source_index];
    const SafetensorsReader& reader = src.files.shard(src.tensor_shard[o.source_index]);
    const TensorEntry* entry = reader.header().Find(meta.name);
    if (!o.role) {
      SPK_ASSIGN_OR_RETURN(uint64_t offset, shard.layout.AbsoluteOffset(o.spec.name));
      SPK_RETURN_IF_ERROR(CopyTensor(ctx, *entry, reader, *out, offset));
      continue;
    }
    QuantizedOffsets at;
    for (const OutputTensor& part : shard.tensors) {
      if (part.source_index != o.source_index || !part.role) continue;
      SPK_ASSIGN_OR_RETURN(at[*part.role], shard.layout.AbsoluteOffset(part.spec.name));
    }
    const auto gs = ctx.global_scales.find(o.source_index);
    SPK_RETURN_IF_ERROR(QuantizeTensor(ctx, *entry, reader, *out, at,
                                       gs == ctx.global_scales.end() ? 0.0f : gs->second));
  }
  if (ctx.durability == Durability::kSynced) SPK_RETURN_IF_ERROR(out->Sync());
  return out->Close();
}

Status WriteIndex(const std::vector<OutputShard>& shards, const std::string& dir) {
  ShardIndex index;
  for (const OutputShard& shard : shards) {
    for (const TensorSpec& spec : shard.layout.tensors()) {
      index.weight_map[spec.name] = shard.file;
      index.total_size += shard.layout.TensorBytes(spec.name);
    }
  }
  return WriteWholeFile(dir + "/" + std::string(kShardIndexFileName), SerializeShardIndex(index));
}

Status WriteConfig(const SourceCheckpoint& src, const QuantPlan& plan, const SchemeChoice& choice,
                   const QuantizeOptions& options, const std::string& dir) {
  nlohmann::ordered_json config = src.config.json;
  config["quantization_config"] =
      MakeQuantizationConfig(*choice.scheme, choice.params.group_size, plan.ignore_entries);
  // vLLM builds a speculators-format draft's config from transformer_layer_config alone
  // (vllm/transformers_utils/configs/speculators/base.py, extract_transformers_pre_trained_config):
  // a top-level quantization_config would be dropped and the packed weights would fail to load.
  auto layer_config = config.find("transformer_layer_config");
  if (config.contains("speculators_model_type") && layer_config != config.end() &&
      layer_config->is_object()) {
    (*layer_config)["quantization_config"] = config["quantization_config"];
  }
  // Outside quantization_config: older compressed-tensors releases reject unknown QuantizationArgs.
  config["sparkulator"] = {
      {"version", kSparkulatorVersion}, {"scheme", options.scheme}, {"method", options.method}};
  if (IsDraft(plan.family.family))
    config["sparkulator"]["target_precision"] = options.target_precision;
  return WriteWholeFile(dir + "/config.json", config.dump(2) + "\n");
}

Result<SchemeChoice> SchemeFromOptions(const QuantizeOptions& options) {
  const QuantScheme* scheme = FindScheme(options.scheme);
  if (scheme == nullptr) {
    return Status::Usage(
        fmt::format("unknown scheme '{}': use one of {}", options.scheme, SchemeNames()));
  }
  if (options.method != "rtn" && options.method != "search") {
    return Status::Usage(fmt::format("unknown --method '{}': use rtn or search", options.method));
  }
  if (options.method == "search" && !scheme->codec->SupportsSearch()) {
    return Status::Usage(fmt::format(
        "--method search is not available for --scheme {} (its scales are fixed by the format); "
        "use --method rtn",
        scheme->name));
  }
  const int64_t group_size = options.group_size.value_or(scheme->default_group_size);
  SPK_RETURN_IF_ERROR(ValidateGroupSize(*scheme, group_size));
  return SchemeChoice{scheme, ParamsFor(*scheme, group_size)};
}

}  // namespace

// Copies every other file of the source (tokenizer, generation config, chat template, remote code,
// README) as it is; sub-folders are reported, not copied.
Result<std::vector<std::string>> CopyOtherFiles(const std::string& src_dir,
                                                const std::string& dst_dir,
                                                std::vector<std::string>* warnings) {
  SPK_ASSIGN_OR_RETURN(auto names, ListDirectory(src_dir));
  std::vector<std::string> copied;
  for (const std::string& name : names) {
    if (name == "config.json" || name == kShardIndexFileName || name.ends_with(".safetensors")) {
      continue;
    }
    std::string from = src_dir + "/" + name;
    if (IsDirectory(from)) {
      warnings->push_back(fmt::format("{}: sub-folder not copied", from));
      continue;
    }
    SPK_RETURN_IF_ERROR(CopyFile(from, dst_dir + "/" + name));
    copied.push_back(name);
  }
  return copied;
}

Result<QuantizeSummary> QuantizeCheckpoint(const QuantizeOptions& options, FileSystem* fs,
                                           Progress* progress, const std::atomic<bool>* cancel) {
  auto start = std::chrono::steady_clock::now();
  Progress no_progress = Progress::Disabled();
  if (progress == nullptr) progress = &no_progress;
  SPK_ASSIGN_OR_RETURN(SchemeChoice choice, SchemeFromOptions(options));
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint src, OpenSourceCheckpoint(fs, options.source));
  if (src.config.has_quantization_config) {
    return Status::InvalidInput(fmt::format(
        "{}/config.json: the model is already quantized (it has a quantization_config); quantize "
        "the original BF16/F16/F32 checkpoint instead",
        src.dir));
  }
  PlanOptions plan_options = options.plan;
  plan_options.scheme = choice.scheme;
  plan_options.group_size = choice.params.group_size;
  SPK_ASSIGN_OR_RETURN(QuantPlan plan, BuildPlan(src.tensors, src.config, plan_options));
  SPK_ASSIGN_OR_RETURN(auto shards, PlanOutputShards(src, plan, choice));

  QuantizeSummary summary;
  summary.source_dir = src.dir;
  summary.destination = options.destination;
  summary.shards = shards.size();
  summary.tensors = src.tensors;
  summary.scheme = options.scheme;
  summary.warnings = src.files.warnings();
  for (const TensorMeta& t : src.tensors) summary.source_tensor_bytes += t.nbytes();
  for (const OutputShard& shard : shards) {
    summary.output_tensor_bytes += shard.layout.file_size() - shard.layout.data_start();
  }
  if (options.dry_run) {
    summary.plan = std::move(plan);
    return summary;
  }

  SPK_ASSIGN_OR_RETURN(AtomicOutputDir out_dir,
                       AtomicOutputDir::Create(options.destination, options.force));
  const int workers = std::min(ResolveThreadCount(options.threads), kMaxWorkers);
  WriteContext ctx{&src,
                   &choice,
                   workers,
                   progress,
                   cancel,
                   options.method == "search" ? QuantMethod::kSearch : QuantMethod::kRtn,
                   options.durability};
  if (choice.scheme->codec->HasGlobalScale()) {
    SPK_ASSIGN_OR_RETURN(ctx.global_scales, ComputeGlobalScales(ctx, plan));
  }
  progress->Start("quantize", summary.source_tensor_bytes);
  for (const OutputShard& shard : shards) {
    SPK_RETURN_IF_ERROR(WriteShard(ctx, shard, fs, out_dir.temp_path() + "/" + shard.file));
  }
  progress->Finish();
  if (src.files.sharded()) SPK_RETURN_IF_ERROR(WriteIndex(shards, out_dir.temp_path()));
  SPK_RETURN_IF_ERROR(WriteConfig(src, plan, choice, options, out_dir.temp_path()));
  SPK_ASSIGN_OR_RETURN(summary.copied_files,
                       CopyOtherFiles(src.dir, out_dir.temp_path(), &summary.warnings));
  SPK_RETURN_IF_ERROR(out_dir.Commit(options.durability));
  summary.plan = std::move(plan);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace spk
