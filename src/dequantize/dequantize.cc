#include "dequantize/dequantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "model/quant_config.h"
#include "model/quantized_modules.h"
#include "safetensors/checkpoint_writer.h"
#include "source/module_reader.h"
#include "source/other_files.h"
#include "source/source_decode.h"

namespace spk {
namespace {

std::string ModuleOfAux(const std::string& name) { return name.substr(0, name.rfind('.')); }

// Dequantizes one module in row blocks into its dense <module>.weight (the sink's tensor 0).
TensorProducer DequantizeProducer(const QuantizedModuleReader& module) {
  const int64_t step = RowsPerBlock(module.cols(), module.row_alignment());
  const uint64_t row_bytes = static_cast<uint64_t>(module.cols()) * DTypeBits(module.dtype()) / 8;
  TensorProducer p;
  p.blocks = static_cast<size_t>((module.rows() + step - 1) / step);
  p.write_block = [&module, step, row_bytes](size_t b, const TensorSink& out) -> Status {
    const int64_t r0 = static_cast<int64_t>(b) * step;
    QuantizedModuleReader::RowBlock block;
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

// compressed-tensors' decompressor returns BF16 for NVFP4, MXFP4 and MXFP8 whatever the source
// dtype, and transformers' save_pretrained of the decompressed model still records the config's
// dtype (seen with compressed-tensors 0.19 and transformers 5.17: "dtype": "float16" beside BF16
// weights). config.json keeps that dtype too, so loaders cast the weights as they would the
// reference's; the warning says which modules differ from it.
std::optional<std::string> DTypeWarning(const std::string& config_dtype,
                                        const std::deque<QuantizedModuleReader>& modules) {
  std::set<std::string_view> written;  // dtypes other than config.json's
  size_t count = 0;
  for (const QuantizedModuleReader& m : modules) {
    if (config_dtype.empty() || TorchDTypeName(m.dtype()) == config_dtype) continue;
    written.insert(DTypeName(m.dtype()));
    ++count;
  }
  if (count == 0) return std::nullopt;
  return fmt::format(
      "{} dequantized modules are {} (the dtype compressed-tensors' decompressor returns for this "
      "format) while config.json keeps torch_dtype {}, as transformers' save_pretrained of the "
      "decompressed model does: vLLM and transformers cast them to {} when they load",
      count, fmt::join(written, "/"), config_dtype, config_dtype);
}

// A quantized module's stored tensors become one dense <module>.weight; every other tensor is
// copied. The deque keeps each reader where its producer points while more are added.
Status AddModules(const SourceCheckpoint& src, const CheckpointScheme& scheme,
                  CheckpointWriter* writer, std::deque<QuantizedModuleReader>* modules,
                  DequantizeSummary* summary) {
  const WeightCodec& codec = *scheme.scheme->codec;
  auto has = [&](const std::string& name) { return src.files.Find(name).has_value(); };
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    const TensorMeta& t = src.tensors[i];
    const size_t shard = src.tensor_shard[i];
    if (auto module = QuantizedModuleOf(codec, t.name, t.dtype, has)) {
      SPK_ASSIGN_OR_RETURN(QuantizedModuleReader reader,
                           QuantizedModuleReader::Open(src, *module, scheme));
      modules->push_back(std::move(reader));
      const QuantizedModuleReader& m = modules->back();
      writer->AddTensors(shard, {{*module + ".weight", m.dtype(), {m.rows(), m.cols()}}},
                         DequantizeProducer(m));
      ++summary->dequantized_modules;
    } else if (!IsQuantAuxName(codec, t.name) ||
               !src.files.Find(ModuleOfAux(t.name) + std::string(ValueSuffix(codec)))) {
      const SafetensorsReader& reader = src.files.shard(shard);
      writer->AddTensors(shard, {{t.name, t.dtype, t.shape}},
                         CopyTensorProducer(reader, *reader.header().Find(t.name)));
      ++summary->copied_tensors;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<DequantizeSummary> DequantizeCheckpoint(const RunContext& run,
                                               const DequantizeOptions& options) {
  FileSystem* fs = run.fs;
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint src, OpenSourceCheckpoint(fs, options.source));
  // A source of another format DecodeQuantizedSource reads (FP8 blocks, GPTQ/AWQ, ModelOpt) is
  // written as `quantize` reads it: the quantized weights decoded, their scales left out.
  const bool decoded = (src.config.has_quantization_config &&
                        SourceQuantMethod(src.config) != "compressed-tensors") ||
                       !src.side_config_file.empty();
  if (!decoded && !src.config.has_quantization_config) {
    return Status::InvalidInput(fmt::format(
        "{}/config.json has no quantization_config: the checkpoint is already dense", src.dir));
  }
  std::optional<CheckpointScheme> scheme;
  if (decoded) {
    SPK_RETURN_IF_ERROR(DecodeQuantizedSource(&src));
  } else {
    SPK_ASSIGN_OR_RETURN(CheckpointScheme s,
                         SchemeFromConfig(src.dir + "/config.json", src.config));
    scheme = std::move(s);
  }
  DequantizeSummary summary;
  summary.source_dir = src.dir;
  summary.destination = options.destination;
  summary.warnings = src.files.warnings();

  CheckpointWriterOptions write = CheckpointWriterOptions::For(
      options.destination, options.force, run.threads, options.durability, src.files.sharded());
  write.cancel = run.cancel;
  CheckpointWriter writer(fs, write);
  for (const std::string& file : src.files.shard_files()) writer.AddShard(file);
  std::deque<QuantizedModuleReader> modules;
  if (scheme) {
    SPK_RETURN_IF_ERROR(AddModules(src, *scheme, &writer, &modules, &summary));
  } else {
    for (size_t i = 0; i < src.tensors.size(); ++i) {
      const TensorMeta& t = src.tensors[i];
      writer.AddTensors(src.tensor_shard[i], {{t.name, t.dtype, t.shape}},
                        SourceTensorProducer(src, i));
      const bool was_quantized = !src.decode.empty() && src.decode[i].decoded();
      ++(was_quantized ? summary.dequantized_modules : summary.copied_tensors);
    }
  }
  writer.AddFile("config.json", DenseConfig(src));
  if (auto warning = DTypeWarning(src.config.torch_dtype, modules)) {
    summary.warnings.push_back(*warning);
  }
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
