#include "quantize/quantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "base/version.h"
#include "model/quant_config.h"
#include "quant/rtn.h"
#include "quant/scheme.h"
#include "quant/stored_names.h"
#include "quantize/global_scales.h"
#include "quantize/record.h"
#include "safetensors/checkpoint_writer.h"
#include "source/other_files.h"
#include "source/source.h"
#include "source/source_decode.h"

namespace spk {
namespace {

std::string ModuleOf(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - kWeightSuffix.size());
}

// The scheme and its parameters, as the options chose them.
struct SchemeChoice {
  const QuantScheme* scheme;
  QuantParams params;
};

// The tensors that replace one quantized weight, as the scheme's codec stores them (docs/formats.md
// section 2), named after its module.
std::vector<TensorSpec> QuantizedTensorSpecs(const std::string& weight_name,
                                             const std::vector<StoredTensor>& stored) {
  std::string m = ModuleOf(weight_name);
  std::vector<TensorSpec> out;
  for (const StoredTensor& st : stored) {
    out.push_back({m + std::string(st.suffix), st.dtype, st.shape});
  }
  return out;
}

// Bytes of one stored row of `t` (its shape past the first dimension).
uint64_t StoredRowBytes(const StoredTensor& t) {
  uint64_t n = DTypeBits(t.dtype) / 8;
  for (size_t d = 1; d < t.shape.size(); ++d) n *= static_cast<uint64_t>(t.shape[d]);
  return n;
}

// Source rows per block: about kWriterBlockBytes, a multiple of the codec's row alignment (a
// block scale covers 128 rows).
int64_t RowsPerBlock(const WeightCodec& codec, uint64_t row_bytes) {
  const int64_t align = codec.RowAlignment();
  const int64_t rows = std::max<int64_t>(1, kWriterBlockBytes / std::max<uint64_t>(row_bytes, 1));
  return std::max(align, rows / align * align);
}

// Quantizes one weight: each block reads rows of the source weight, quantizes them and writes
// their rows of every row-wise stored tensor (quant/codec.h RowBlockBytes); `finish` writes the
// per-weight tensors: the original shape, the global scale, and the zero points, which pack
// across rows and so wait for every block. The sink's tensors are `stored`, in its order.
TensorProducer QuantizeProducer(const SourceCheckpoint& src, size_t tensor,
                                const SchemeChoice& choice, QuantMethod method,
                                const std::vector<StoredTensor>& stored, float global_scale) {
  const QuantParams qp = choice.params;
  const WeightCodec* codec = choice.scheme->codec;
  const SafetensorsReader& reader = src.files.shard(src.tensor_shard[tensor]);
  // The dtype it is read in: its own, or the one a pre-quantized source decodes to.
  const TensorMeta& meta = src.tensors[tensor];
  const int64_t rows = meta.shape[0], cols = meta.shape[1];
  const uint64_t row_bytes = static_cast<uint64_t>(cols) * (DTypeBits(meta.dtype) / 8);
  const StoredTensor* zp_tensor = FindRole(stored, TensorRole::kZeroPoint);
  const int64_t groups = zp_tensor != nullptr ? zp_tensor->shape[1] : 0;
  const int64_t rows_per_block = RowsPerBlock(*codec, row_bytes);
  // Filled row block by row block, packed and written by `finish`.
  auto zero_points = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(rows * groups));

  TensorProducer p;
  p.blocks = static_cast<size_t>((rows + rows_per_block - 1) / rows_per_block);
  p.write_block = [=, &src, &reader, &meta](size_t b, const TensorSink& out) -> Status {
    int64_t r0 = static_cast<int64_t>(b) * rows_per_block;
    int64_t n = std::min(rows_per_block, rows - r0);
    const size_t weight_bytes = static_cast<size_t>(n) * row_bytes;
    // One buffer per row-wise stored tensor, holding this block's rows of it; not zero-filled
    // (a memset of the codes cost a twentieth of FP8's CPU time): the codecs write every byte of
    // their rows, padding of partial words included.
    std::vector<std::unique_ptr<uint8_t[]>> parts(stored.size());
    std::vector<size_t> part_bytes(stored.size(), 0);
    RowBlockBytes q;
    for (size_t i = 0; i < stored.size(); ++i) {
      const int64_t per_row = stored[i].weight_rows_per_row;
      if (per_row == 0) continue;
      part_bytes[i] = static_cast<size_t>((n + per_row - 1) / per_row) * StoredRowBytes(stored[i]);
      parts[i].reset(new uint8_t[part_bytes[i]]);
      q[stored[i].role] = parts[i].get();
    }
    if (groups > 0) {
      q[TensorRole::kZeroPoint] = reinterpret_cast<uint8_t*>(zero_points->data() + r0 * groups);
    }
    // The kernels read the source rows where they are: the shard's mapping in the page cache
    // (a buffer under SPARKULATOR_READ=pread, or for a source decoded from a quantized format).
    SPK_RETURN_IF_ERROR(
        ConsumeSourceRows(src, tensor, r0, n, [&](std::span<const uint8_t> weight) -> Status {
          Status qs =
              codec->QuantizeRows(qp, method, meta.dtype, weight.data(), n, cols, global_scale, q);
          if (qs.ok()) return qs;
          return Status(qs.code(), fmt::format("{}: tensor '{}': rows {}..{}: {}", reader.path(),
                                               meta.name, r0, r0 + n - 1, qs.message()));
        }));
    for (size_t i = 0; i < stored.size(); ++i) {
      if (part_bytes[i] == 0) continue;
      const uint64_t first_row = static_cast<uint64_t>(r0 / stored[i].weight_rows_per_row);
      SPK_RETURN_IF_ERROR(
          out.Write(i, first_row * StoredRowBytes(stored[i]), {parts[i].get(), part_bytes[i]}));
    }
    out.Advance(weight_bytes);
    return Status::Ok();
  };
  p.finish = [=](const TensorSink& out) -> Status {
    for (size_t i = 0; i < stored.size(); ++i) {
      const StoredTensor& t = stored[i];
      if (t.role == TensorRole::kShape) {
        int64_t shape[2] = {rows, cols};
        SPK_RETURN_IF_ERROR(out.Write(i, 0, {reinterpret_cast<const uint8_t*>(shape), 16}));
      } else if (t.role == TensorRole::kGlobalScale) {
        SPK_RETURN_IF_ERROR(
            out.Write(i, 0, {reinterpret_cast<const uint8_t*>(&global_scale), sizeof(float)}));
      } else if (t.role == TensorRole::kZeroPoint) {
        std::vector<int32_t> zp_packed(static_cast<size_t>(t.shape[0] * t.shape[1]));
        PackZeroPoints(qp.bits, zero_points->data(), rows, groups, zp_packed.data());
        SPK_RETURN_IF_ERROR(out.Write(
            i, 0, {reinterpret_cast<const uint8_t*>(zp_packed.data()), zp_packed.size() * 4}));
      }
    }
    return Status::Ok();
  };
  return p;
}

// Declares every output tensor: a quantized weight becomes the codec's stored tensors, any other
// tensor is copied as it is, each into the output shard named like its source shard.
void AddOutputTensors(const SourceCheckpoint& src, const QuantPlan& plan,
                      const SchemeChoice& choice, QuantMethod method,
                      const GlobalScales& global_scales, CheckpointWriter& writer) {
  for (const std::string& file : src.files.shard_files()) writer.AddShard(file);
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    const TensorMeta& t = src.tensors[i];
    const size_t shard = src.tensor_shard[i];
    if (plan.tensors[i].action == TensorAction::kQuantize) {
      std::vector<StoredTensor> stored =
          choice.scheme->codec->Tensors(choice.params, t.dtype, t.shape[0], t.shape[1]);
      writer.AddTensors(shard, QuantizedTensorSpecs(t.name, stored),
                        QuantizeProducer(src, i, choice, method, stored, global_scales.For(i)));
    } else {
      writer.AddTensors(shard, {{t.name, t.dtype, t.shape}}, SourceTensorProducer(src, i));
    }
  }
}

// The source's config.json with the quantization_config vLLM and compressed-tensors read, and
// the record of this run (quantize/record.h).
std::string QuantizedConfig(const SourceCheckpoint& src, const QuantPlan& plan,
                            const SchemeChoice& choice, const QuantizeOptions& options,
                            const QuantizeSummary& summary) {
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
  config["sparkulator"] = QuantizeRecord(options, plan, choice.params.group_size,
                                         summary.source_tensor_bytes, summary.output_tensor_bytes);
  if (!src.decoded_from.empty()) {
    // What the source was: its weights were decoded from this format before quantizing (read
    // from hf_quant_config.json for an older ModelOpt export, which "from" then names).
    nlohmann::ordered_json& decoded = config["sparkulator"]["decoded_source"];
    decoded = {{"quantization_config", nlohmann::ordered_json::parse(src.decoded_from)}};
    if (src.decoded_from_file != "config.json") decoded["from"] = src.decoded_from_file;
  }
  return config.dump(2) + "\n";
}

Result<SchemeChoice> SchemeFromOptions(const QuantizeOptions& options) {
  const QuantScheme* scheme = options.plan.scheme;
  if (options.method == QuantMethod::kSearch && !scheme->codec->SupportsSearch()) {
    return Status::Usage(fmt::format(
        "--method search is not available for --scheme {} (its scales are fixed by the format); "
        "use --method rtn",
        scheme->name));
  }
  SPK_RETURN_IF_ERROR(ValidateGroupSize(*scheme, options.plan.group_size));
  return SchemeChoice{scheme, ParamsFor(*scheme, options.plan.group_size)};
}

// What decides a resumable run's bytes beyond the planned shards and files the writer hashes
// itself: the source files (names and sizes: a source replaced by another of other sizes starts
// afresh) and the scale method, which config.json does not record.
std::string ResumeIdentity(FileSystem* fs, const SourceCheckpoint& src,
                           const QuantizeOptions& options) {
  std::string identity = std::string(kSparkulatorVersion) + "\n" + src.dir + "\n" +
                         std::string(QuantMethodName(options.method)) + "\n";
  for (const TensorMeta& t : src.tensors) {
    identity +=
        t.name + " " + std::string(DTypeName(t.dtype)) + " " + std::to_string(t.nbytes()) + "\n";
  }
  for (const std::string& file : src.files.shard_files()) {
    Result<std::unique_ptr<RandomAccessFile>> opened = fs->OpenForRead(src.dir + "/" + file);
    identity += file + " " + (opened.ok() ? std::to_string((*opened)->size()) : "?") + "\n";
  }
  return identity;
}

}  // namespace

Result<QuantizeOptions::Part> ParsePart(std::string_view text) {
  const size_t slash = text.find('/');
  int index = 0, count = 0;
  auto number = [](std::string_view s, int* out) {
    if (s.empty() || s.size() > 6) return false;
    *out = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      *out = *out * 10 + (c - '0');
    }
    return true;
  };
  if (slash == std::string_view::npos || !number(text.substr(0, slash), &index) ||
      !number(text.substr(slash + 1), &count) || index < 1 || index > count) {
    return Status::Usage(fmt::format(
        "--part {}: expected I/N with 1 <= I <= N (part I of a job split into N, e.g. 2/3)", text));
  }
  return QuantizeOptions::Part{index, count};
}

std::vector<size_t> PartOfShards(const std::vector<uint64_t>& shard_bytes, int index, int count) {
  std::vector<size_t> order(shard_bytes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return shard_bytes[a] > shard_bytes[b]; });
  std::vector<uint64_t> load(count, 0);
  std::vector<size_t> mine;
  for (size_t shard : order) {
    const size_t lightest = std::min_element(load.begin(), load.end()) - load.begin();
    load[lightest] += shard_bytes[shard];
    if (static_cast<int>(lightest) == index - 1) mine.push_back(shard);
  }
  std::sort(mine.begin(), mine.end());
  return mine;
}

Result<QuantizeSummary> QuantizeCheckpoint(const RunContext& run, const QuantizeOptions& options) {
  auto start = std::chrono::steady_clock::now();
  FileSystem* fs = run.fs;
  Progress no_progress = Progress::Disabled();
  Progress* progress = run.progress != nullptr ? run.progress : &no_progress;
  SPK_ASSIGN_OR_RETURN(SchemeChoice choice, SchemeFromOptions(options));
  // A pre-quantized source (FP8 blocks) is read as the dense checkpoint it decodes to; any other
  // quantization_config is refused there, naming what is decoded.
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint src, OpenDenseSource(fs, options.source));
  PlanOptions plan_options = options.plan;
  if (!options.target.empty()) {
    SPK_ASSIGN_OR_RETURN(plan_options.target, LoadTargetModel(fs, options.target));
  }
  SPK_ASSIGN_OR_RETURN(QuantPlan plan, BuildPlan(src.tensors, src.config, plan_options));
  uint64_t source_bytes = 0;
  for (const TensorMeta& t : src.tensors) source_bytes += t.nbytes();
  auto write = CheckpointWriterOptions::For(options.destination, options.force, run.threads,
                                            options.durability, src.files.sharded());
  write.progress = progress;
  write.progress_label = "quantize";
  write.cancel = run.cancel;
  write.progress_total = source_bytes;
  write.resume = options.resume;
  if (options.resume || options.part) write.resume_identity = ResumeIdentity(fs, src, options);
  if (options.part) {
    std::vector<uint64_t> bytes;
    for (const std::string& file : src.files.shard_files()) {
      SPK_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f,
                           fs->OpenForRead(src.dir + "/" + file));
      bytes.push_back(f->size());
    }
    write.part = CheckpointWriterOptions::Part{
        options.part->index, options.part->count,
        PartOfShards(bytes, options.part->index, options.part->count)};
  }
  GlobalScales global_scales;
  if (choice.scheme->codec->HasGlobalScale() && !options.dry_run) {
    SPK_ASSIGN_OR_RETURN(global_scales, ComputeGlobalScales(src, plan, run.threads, run.cancel));
  }
  const std::optional<CheckpointWriterOptions::Part> write_part = write.part;
  CheckpointWriter writer(fs, std::move(write));
  AddOutputTensors(src, plan, choice, options.method, global_scales, writer);
  SPK_RETURN_IF_ERROR(writer.Plan());

  QuantizeSummary summary;
  summary.source_dir = src.dir;
  summary.destination = options.destination;
  summary.shards = writer.shards();
  summary.tensors = src.tensors;
  // The registry row's name, however --scheme was spelled (W4A16, w4a16): the same checkpoint and
  // report whichever case the user typed.
  summary.scheme = std::string(choice.scheme->name);
  summary.warnings = src.files.warnings();
  summary.warnings.insert(summary.warnings.end(), plan.warnings.begin(), plan.warnings.end());
  summary.source_tensor_bytes = source_bytes;
  summary.decoded_from = src.decoded_from;
  summary.output_tensor_bytes = writer.tensor_bytes();
  if (options.dry_run) {
    summary.plan = std::move(plan);
    return summary;
  }

  writer.AddFile("config.json", QuantizedConfig(src, plan, choice, options, summary));
  SPK_ASSIGN_OR_RETURN(summary.copied_files,
                       CopyOtherFiles(fs, src.dir, &writer, &summary.warnings));
  SPK_RETURN_IF_ERROR(writer.Finish());
  summary.reused_shards = writer.reused_shards();
  if (write_part) {
    for (size_t shard : write_part->shards) {
      summary.part_shards.push_back(src.files.shard_files()[shard]);
    }
  }
  summary.plan = std::move(plan);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace spk
