#include "quantize/quantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "base/parallel.h"
#include "base/version.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/source.h"
#include "io/atomic_dir.h"
#include "io/fs_util.h"
#include "quant/rtn.h"
#include "quant/scheme.h"
#include "quant/search.h"
#include "quant/simd/rtn_simd.h"
#include "quant/simd/search_simd.h"
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

enum class OutputKind { kCopy, kPacked, kScale, kShape, kZeroPoint };

struct OutputTensor {
  TensorSpec spec;
  size_t source_index;  // into SourceCheckpoint::tensors
  OutputKind kind;
};

struct OutputShard {
  std::string file;
  std::vector<OutputTensor> tensors;  // in the order the reference writer lays them out
  SafetensorsLayout layout;
};

std::string ModuleOf(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string_view(".weight").size());
}

// The tensors that replace one quantized weight (docs/formats.md 2).
std::vector<OutputTensor> QuantizedTensors(const TensorMeta& t, size_t index,
                                           const QuantParams& qp) {
  std::string m = ModuleOf(t.name);
  int64_t rows = t.shape[0], cols = t.shape[1];
  std::vector<OutputTensor> out = {
      {{m + ".weight_packed", DType::kI32, PackedShape(rows, cols, qp.bits)},
       index,
       OutputKind::kPacked},
      {{m + ".weight_scale", t.dtype, ScaleShape(rows, cols, qp.group_size)},
       index,
       OutputKind::kScale},
      {{m + ".weight_shape", DType::kI64, {2}}, index, OutputKind::kShape},
  };
  if (!qp.symmetric) {
    out.push_back({{m + ".weight_zero_point", DType::kI32,
                    ZeroPointShape(rows, cols, qp.bits, qp.group_size)},
                   index,
                   OutputKind::kZeroPoint});
  }
  return out;
}

Result<std::vector<OutputShard>> PlanOutputShards(const SourceCheckpoint& src,
                                                  const QuantPlan& plan, const QuantParams& qp) {
  std::vector<OutputShard> shards(src.files.shard_files().size());
  for (size_t s = 0; s < shards.size(); ++s) shards[s].file = src.files.shard_files()[s];
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    OutputShard& shard = shards[src.tensor_shard[i]];
    const TensorMeta& t = src.tensors[i];
    if (plan.tensors[i].action == TensorAction::kQuantize) {
      for (OutputTensor& o : QuantizedTensors(t, i, qp)) shard.tensors.push_back(std::move(o));
    } else {
      shard.tensors.push_back({{t.name, t.dtype, t.shape}, i, OutputKind::kCopy});
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
  const QuantParams* qp;
  int threads;
  Progress* progress;
  const std::atomic<bool>* cancel;
  bool search = false;  // --method search: QuantizeRowsSearchFast instead of RTN
  Durability durability = Durability::kSynced;
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

struct QuantizedOffsets {
  uint64_t packed, scale, shape, zero_point;
};

Status QuantizeTensor(const WriteContext& ctx, const TensorEntry& entry,
                      const SafetensorsReader& reader, WritableFile& out,
                      const QuantizedOffsets& at) {
  const QuantParams& qp = *ctx.qp;
  const int64_t rows = entry.shape[0], cols = entry.shape[1];
  const uint64_t elem = DTypeBits(entry.dtype) / 8;
  const uint64_t row_bytes = static_cast<uint64_t>(cols) * elem;
  const int64_t words = PackedShape(rows, cols, qp.bits)[1];
  const int64_t groups = ScaleShape(rows, cols, qp.group_size)[1];
  const int64_t rows_per_block =
      std::max<int64_t>(1, kBlockBytes / std::max<uint64_t>(row_bytes, 1));
  const size_t blocks = static_cast<size_t>((rows + rows_per_block - 1) / rows_per_block);
  std::vector<int32_t> zero_points(qp.symmetric ? 0 : static_cast<size_t>(rows * groups));

  Status s = ParallelFor(
      ctx.threads, blocks,
      [&](size_t b) -> Status {
        int64_t r0 = static_cast<int64_t>(b) * rows_per_block;
        int64_t n = std::min(rows_per_block, rows - r0);
        std::vector<uint8_t> weight(static_cast<size_t>(n) * row_bytes);
        SPK_RETURN_IF_ERROR(reader.ReadTensorBytes(entry, r0 * row_bytes, weight));
        std::vector<int32_t> packed(static_cast<size_t>(n * words));
        std::vector<uint8_t> scales(static_cast<size_t>(n * groups) * elem);
        RowBlockQuantOutput q{packed.data(), scales.data(),
                              qp.symmetric ? nullptr : zero_points.data() + r0 * groups};
        Status qs = ctx.search ? QuantizeRowsSearchFast(qp, entry.dtype, weight.data(), n, cols, q)
                               : QuantizeRowsRtnFast(qp, entry.dtype, weight.data(), n, cols, q);
        if (!qs.ok()) {
          return Status(qs.code(), fmt::format("{}: tensor '{}': rows {}..{}: {}", reader.path(),
                                               entry.name, r0, r0 + n - 1, qs.message()));
        }
        SPK_RETURN_IF_ERROR(
            WriteBlock(ctx, out, at.packed + r0 * words * 4,
                       {reinterpret_cast<const uint8_t*>(packed.data()), packed.size() * 4}));
        SPK_RETURN_IF_ERROR(WriteBlock(ctx, out, at.scale + r0 * groups * elem, scales));
        ctx.progress->Advance(weight.size());
        return Status::Ok();
      },
      ctx.cancel);
  SPK_RETURN_IF_ERROR(s);
  int64_t shape[2] = {rows, cols};
  SPK_RETURN_IF_ERROR(out.WriteAt(at.shape, {reinterpret_cast<const uint8_t*>(shape), 16}));
  if (qp.symmetric) return Status::Ok();
  std::vector<int64_t> zp_shape = ZeroPointShape(rows, cols, qp.bits, qp.group_size);
  std::vector<int32_t> zp_packed(static_cast<size_t>(zp_shape[0] * zp_shape[1]));
  PackZeroPoints(qp.bits, zero_points.data(), rows, groups, zp_packed.data());
  return out.WriteAt(at.zero_point,
                     {reinterpret_cast<const uint8_t*>(zp_packed.data()), zp_packed.size() * 4});
}

Status WriteShard(const WriteContext& ctx, const OutputShard& shard, FileSystem* fs,
                  const std::string& path) {
  SPK_ASSIGN_OR_RETURN(auto out, fs->CreateForWrite(path));
  SPK_RETURN_IF_ERROR(WriteSafetensorsHeader(*out, shard.layout));
  const SourceCheckpoint& src = *ctx.src;
  for (const OutputTensor& o : shard.tensors) {
    if (o.kind != OutputKind::kCopy && o.kind != OutputKind::kPacked) continue;
    const TensorMeta& meta = src.tensors[o.source_index];
    const SafetensorsReader& reader = src.files.shard(src.tensor_shard[o.source_index]);
    const TensorEntry* entry = reader.header().Find(meta.name);
    if (o.kind == OutputKind::kCopy) {
      SPK_ASSIGN_OR_RETURN(uint64_t offset, shard.layout.AbsoluteOffset(o.spec.name));
      SPK_RETURN_IF_ERROR(CopyTensor(ctx, *entry, reader, *out, offset));
      continue;
    }
    std::string m = ModuleOf(meta.name);
    QuantizedOffsets at{};
    SPK_ASSIGN_OR_RETURN(at.packed, shard.layout.AbsoluteOffset(m + ".weight_packed"));
    SPK_ASSIGN_OR_RETURN(at.scale, shard.layout.AbsoluteOffset(m + ".weight_scale"));
    SPK_ASSIGN_OR_RETURN(at.shape, shard.layout.AbsoluteOffset(m + ".weight_shape"));
    if (!ctx.qp->symmetric) {
      SPK_ASSIGN_OR_RETURN(at.zero_point, shard.layout.AbsoluteOffset(m + ".weight_zero_point"));
    }
    SPK_RETURN_IF_ERROR(QuantizeTensor(ctx, *entry, reader, *out, at));
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

Status WriteConfig(const SourceCheckpoint& src, const QuantPlan& plan, const QuantParams& qp,
                   const QuantizeOptions& options, const std::string& dir) {
  nlohmann::ordered_json config = src.config.json;
  WeightQuantArgs args;
  args.num_bits = qp.bits;
  args.symmetric = qp.symmetric;
  if (qp.group_size != kChannelWise) args.group_size = qp.group_size;
  config["quantization_config"] = MakeQuantizationConfig(args, plan.ignore_entries);
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

Result<QuantParams> ParamsFromOptions(const QuantizeOptions& options) {
  const QuantScheme* scheme = FindScheme(options.scheme);
  if (scheme == nullptr) {
    std::vector<std::string> names;
    for (const QuantScheme& s : AllSchemes()) names.emplace_back(s.name);
    return Status::Usage(
        fmt::format("unknown scheme '{}': use one of {}", options.scheme, fmt::join(names, ", ")));
  }
  int64_t g = options.group_size;
  if (g != kChannelWise && g != 32 && g != 64 && g != 128) {
    return Status::Usage(
        fmt::format("--group-size {} is not supported: use 32, 64, 128 or -1 (channel-wise)", g));
  }
  if (options.method != "rtn" && options.method != "search") {
    return Status::Usage(fmt::format("unknown --method '{}': use rtn or search", options.method));
  }
  return ParamsFor(*scheme, g);
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
  SPK_ASSIGN_OR_RETURN(QuantParams qp, ParamsFromOptions(options));
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint src, OpenSourceCheckpoint(fs, options.source));
  if (src.config.has_quantization_config) {
    return Status::InvalidInput(fmt::format(
        "{}/config.json: the model is already quantized (it has a quantization_config); quantize "
        "the original BF16/F16/F32 checkpoint instead",
        src.dir));
  }
  PlanOptions plan_options = options.plan;
  plan_options.bits = qp.bits;
  plan_options.group_size = qp.group_size;
  SPK_ASSIGN_OR_RETURN(QuantPlan plan, BuildPlan(src.tensors, src.config, plan_options));
  SPK_ASSIGN_OR_RETURN(auto shards, PlanOutputShards(src, plan, qp));

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
  WriteContext ctx{
      &src, &qp, workers, progress, cancel, options.method == "search", options.durability};
  progress->Start("quantize", summary.source_tensor_bytes);
  for (const OutputShard& shard : shards) {
    SPK_RETURN_IF_ERROR(WriteShard(ctx, shard, fs, out_dir.temp_path() + "/" + shard.file));
  }
  progress->Finish();
  if (src.files.sharded()) SPK_RETURN_IF_ERROR(WriteIndex(shards, out_dir.temp_path()));
  SPK_RETURN_IF_ERROR(WriteConfig(src, plan, qp, options, out_dir.temp_path()));
  SPK_ASSIGN_OR_RETURN(summary.copied_files,
                       CopyOtherFiles(src.dir, out_dir.temp_path(), &summary.warnings));
  SPK_RETURN_IF_ERROR(out_dir.Commit(options.durability));
  summary.plan = std::move(plan);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace spk
