// Checker parts: the tensors of the registry formats other than pack-quantized (FP8 channel and
// block, INT8 / W4AFP8, NVFP4, MXFP4, MXFP8), verified by the checkpoint's codec
// (quant/codec.h Tensors(): names, dtypes, shapes), their scale values by one rule per scale
// dtype, NVFP4's global scale shared by fused partners, and the shape rules vLLM 0.32's kernels
// state for the format (checkpoint/gemm.h JudgeGemm, the plan's judge, so that check and quantize
// agree).
#include <cmath>
#include <map>

#include "check/checker.h"
#include "checkpoint/gemm.h"
#include "checkpoint/quantized_modules.h"
#include "quant/float_formats.h"
#include "tensor/float_convert.h"

namespace spk::check_internal {

// A .weight that holds a quantized module's values is that module's `packed` tensor.
void Checker::MarkUnpackedValues() {
  if (!scheme_) return;
  const WeightCodec& codec = *scheme_->scheme->codec;
  if (ValueSuffix(codec) != kWeight) return;
  auto has = [&](const std::string& name) { return tensors_.count(name) > 0; };
  for (auto& [module, mt] : modules_) {
    if (!mt.weight) continue;
    const std::string name = module + std::string(kWeight);
    if (QuantizedModuleOf(codec, name, mt.weight->entry->dtype, has)) {
      mt.packed = mt.weight;
      mt.weight.reset();
    }
  }
}

std::optional<std::pair<int64_t, int64_t>> Checker::CheckCodecTensors(const std::string& module,
                                                                      const ModuleTensors& mt,
                                                                      LinearModule* lm) {
  const WeightCodec& codec = *scheme_->scheme->codec;
  const QuantParams& p = scheme_->params;
  const TensorEntry& values = *mt.packed->entry;
  const std::string file = FileOf(*mt.packed);
  const std::string value_name = module + std::string(ValueSuffix(codec));
  if (!mt.scale) {
    Add(FindingCode::kMissingWeightScale, module, file,
        fmt::format("{}.weight_scale is missing: vLLM does not report it and runs on "
                    "uninitialised memory",
                    module),
        "requantize the module (or restore the shard that held weight_scale)");
    return std::nullopt;
  }
  const DType dtype = WeightDTypeOfScales(mt.scale->entry->dtype);
  auto dims = WeightDimsFromValues(codec, p, dtype, values.shape);
  if (!dims) {
    Add(FindingCode::kQuantTensorShape, module, file,
        fmt::format("{} is {} {}, which no {} weight stores", value_name, DTypeName(values.dtype),
                    ShapeToString(values.shape), scheme_->scheme->name),
        "requantize the module");
    return std::nullopt;
  }
  const auto [rows, cols] = *dims;
  bool ok = true;
  std::set<std::string> expected;
  for (const StoredTensor& want : codec.Tensors(p, dtype, rows, cols)) {
    const std::string name = module + std::string(want.suffix);
    expected.insert(name);
    auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      Add(FindingCode::kMissingQuantTensor, name, file,
          fmt::format("{} is missing: a {} module stores it, and vLLM loads the module without it",
                      name, scheme_->scheme->name),
          "requantize the module (or restore the shard that held it)");
      ok = false;
      continue;
    }
    const TensorEntry& got = *it->second.entry;
    if (got.dtype != want.dtype || got.shape != want.shape) {
      Add(FindingCode::kQuantTensorShape, name, FileOf(it->second),
          fmt::format("{} is {} {}; a [{}, {}] {} weight stores {} {}", name, DTypeName(got.dtype),
                      ShapeToString(got.shape), rows, cols, scheme_->scheme->name,
                      DTypeName(want.dtype), ShapeToString(want.shape)),
          "requantize the module");
      ok = false;
      continue;
    }
    if (want.role == TensorRole::kScale) CheckScaleValues(module, it->second);
    if (want.role == TensorRole::kGlobalScale) {
      float gs = 0.0f;
      Status read = Reader(it->second).ReadTensor(got, {reinterpret_cast<uint8_t*>(&gs), 4});
      if (!read.ok()) {
        Add(FindingCode::kSafetensorsInvalid, name, FileOf(it->second), read.message(), "");
      } else if (!std::isfinite(gs) || gs <= 0.0f) {
        Add(FindingCode::kGlobalScaleInvalid, name, FileOf(it->second),
            fmt::format("{} is {}; it must be finite and positive (vLLM divides by it)", name, gs),
            "requantize the module from the source weights");
      } else {
        lm->global_scale = gs;
        lm->global_scale_file = FileOf(it->second);
      }
    }
  }
  // Quantization tensors of other formats (a zero point in a symmetric scheme, a weight_shape or
  // global scale the format does not have) are parameters vLLM never creates.
  for (auto [suffix, slot] : {std::pair{kShape, mt.shape},
                              {kZeroPoint, mt.zero_point},
                              {kGlobalScale, mt.global_scale}}) {
    const std::string name = module + std::string(suffix);
    if (slot && !expected.count(name)) {
      Add(FindingCode::kUnexpectedQuantTensor, name, FileOf(*slot),
          fmt::format("{} is stored, but a {} module has no such parameter: vLLM fails to load "
                      "it",
                      name, scheme_->scheme->name),
          "delete the tensor");
    }
  }
  if (!ok) return std::nullopt;
  return dims;
}

void Checker::CheckVllmShapeRules() {
  std::map<std::string, int64_t> fused_out;  // fused vLLM module -> rows of its members
  for (const LinearModule& lm : linears_) fused_out[lm.fused] += lm.out_features;
  CheckPackedKernelRules(fused_out);
  if (!scheme_) return;
  for (const LinearModule& lm : linears_) {
    if (!lm.codec_shape) continue;
    const auto& [out, in, file] = *lm.codec_shape;
    const GemmGeometry gemm{.module = lm.module,
                            .vllm_module = lm.fused,
                            .out = out,
                            .in = in,
                            .fused_out = fused_out[lm.fused],
                            .parallel = MapParallelStyle(map_, lm.module)};
    if (auto rule =
            JudgeGemm(*scheme_->scheme, scheme_->params.group_size, gemm, options_.tp).plan_rule) {
      Add(FindingCode::kKernelRule, lm.module, file,
          fmt::format("{} (vLLM module {}) [{}, {}] at --tp {}: {}", lm.module, lm.vllm_name, out,
                      in, options_.tp, *rule),
          fmt::format("keep {} dense (ignore it; sparkulator quantize does) or choose a scheme "
                      "without this rule",
                      lm.fused));
    }
  }
}

// The WNA16 kernel rules for the release judged, for each module's own config group: Marlin's old
// tile rule (the plan's) before kFirstPaddedMarlinVllm; from it, an error only where neither a
// CUDA GPU nor the CPU build has a kernel for the shape, a warning naming the platform where one
// of them refuses it. A width without a vLLM kernel is reported once for the scheme, not here.
void Checker::CheckPackedKernelRules(const std::map<std::string, int64_t>& fused_out) {
  const bool padded =
      CompareVllmVersions(vllm_.version, *ParseVllmVersion(kFirstPaddedMarlinVllm)) >= 0;
  for (const LinearModule& lm : linears_) {
    if (!lm.packed_shape) continue;
    const LinearModule::PackedShape& s = *lm.packed_shape;
    const QuantScheme* row =
        FindSchemeFor("pack-quantized", "int", s.bits, s.symmetric,
                      StrategyName(WeightStrategy::kGroupOrChannel, s.group_size));
    if (row == nullptr) continue;
    auto it = fused_out.find(lm.fused);
    const GemmJudgement v = JudgeGemm(*row, s.group_size,
                                      {.module = lm.module,
                                       .vllm_module = lm.fused,
                                       .out = s.out,
                                       .in = s.in,
                                       .fused_out = it == fused_out.end() ? 0 : it->second,
                                       .parallel = MapParallelStyle(map_, lm.module)},
                                      options_.tp);
    const std::string shape = fmt::format("[{}, {}] at --tp {}", s.out, s.in, options_.tp);
    const std::string keep = "keep the module dense (ignore it) or use another group size / --tp";
    if (!padded) {
      if (v.plan_rule) {
        AddWna16KernelFinding(
            FindingCode::kKernelRule, lm.module, s.file,
            fmt::format("{}: {}; vLLM {} has no kernel for it (check takes Marlin's zero-padded "
                        "tiles from vLLM {} on)",
                        shape, *v.plan_rule, vllm_.version.text, kFirstPaddedMarlinVllm),
            keep);
      }
      continue;
    }
    if (v.row->cuda_rule == nullptr) continue;
    const std::string where = fmt::format("{} (vLLM module {})", shape, lm.fused);
    if (v.split) {
      Add(FindingCode::kKernelRule, lm.module, s.file,
          fmt::format("{}: {}; vLLM cannot shard it", where, *v.split), keep);
    } else if (v.cuda && (v.cpu || !v.row->cpu_runs_format)) {
      AddWna16KernelFinding(
          FindingCode::kKernelRule, lm.module, s.file,
          fmt::format("{}: no vLLM {} kernel takes it; on CUDA vLLM raises \"{}\"; on the CPU "
                      "build \"{}\"",
                      where, vllm_.version.text, *v.cuda, v.cpu.value_or("")),
          keep);
    } else if (v.cuda) {
      AddWna16KernelFinding(
          FindingCode::kKernelRulePlatform, lm.module, s.file,
          fmt::format("{}: vLLM {} loads it only on the CPU build (CPUWNA16LinearKernel); on CUDA "
                      "GPUs it raises \"{}\"",
                      where, vllm_.version.text, *v.cuda),
          "to serve it on a GPU, keep the module dense (sparkulator quantize does)");
    } else if (v.cpu && v.row->cpu_runs_format) {
      AddWna16KernelFinding(
          FindingCode::kKernelRulePlatform, lm.module, s.file,
          fmt::format("{}: vLLM {} loads it on CUDA GPUs (MarlinLinearKernel zero-pads the tiles), "
                      "but its CPU build raises \"{}\"",
                      where, vllm_.version.text, *v.cpu),
          "to serve it on vLLM's CPU build, keep the module dense (sparkulator quantize does)");
    }
  }
}

void Checker::AddWna16KernelFinding(FixedCode code, std::string module, std::string file,
                                    std::string message, std::string fix) {
  const ModuleMap* map = map_.map;
  const bool skips = map != nullptr && map->wna16_batch_invariant_needs_no_kernel();
  if (options_.vllm_batch_invariant && skips) {
    Add(FindingCode::kVllmBatchInvariantNoKernel, std::move(module), std::move(file),
        fmt::format("{} ({}, without VLLM_BATCH_INVARIANT=1): {}; served with "
                    "VLLM_BATCH_INVARIANT=1, vLLM {} chooses no kernel for a WNA16 Linear ({}): "
                    "it loads without a kernel rule and runs vLLM's batch-invariant path (the "
                    "weights dequantized at every forward, then a batch-invariant matmul), slower "
                    "than a kernel",
                    CodeName(code.code), SeverityName(code.severity()), message, map->release,
                    map->batch_invariant.evidence),
        fmt::format("none needed while serving with VLLM_BATCH_INVARIANT=1; for a kernel's speed: "
                    "{}",
                    fix));
    return;
  }
  if (skips) {
    fix += fmt::format(
        "; or serve with VLLM_BATCH_INVARIANT=1: vLLM {} then loads it without a kernel, on its "
        "slower batch-invariant path (check it so with --vllm-batch-invariant)",
        map->release);
  } else if (options_.vllm_batch_invariant) {
    const std::string& refusal = map != nullptr ? map->batch_invariant.evidence : "";
    fix += map != nullptr && map->batch_invariant.probed
               ? fmt::format(
                     "; VLLM_BATCH_INVARIANT=1 is no way around it on vLLM {}: it still "
                     "chooses a kernel (\"{}\")",
                     map->release, refusal.substr(0, refusal.find('\n')))
               : fmt::format(
                     "; VLLM_BATCH_INVARIANT=1 is not known to avoid it on vLLM {} (no "
                     "module map of that release records it)",
                     vllm_.version.text);
  }
  Add(code, std::move(module), std::move(file), std::move(message), std::move(fix));
}

void Checker::CheckGlobalScaleAgreement(const std::vector<const LinearModule*>& members,
                                        const std::string& fused) {
  const LinearModule* first = nullptr;
  for (const LinearModule* m : members) {
    if (!m->global_scale) continue;
    if (first == nullptr) {
      first = m;
    } else if (*m->global_scale != *first->global_scale) {
      Add(FindingCode::kGlobalScaleDiffers, fused, m->global_scale_file,
          fmt::format("{}.weight_global_scale ({}, in {}) differs from {}.weight_global_scale "
                      "({}, in {}): vLLM fuses them and keeps only the largest "
                      "(compressed_tensors_w4a4_nvfp4.py process_weights_after_loading: "
                      "weight_global_scale.max()), so the other members dequantize wrong",
                      m->module, *m->global_scale, m->global_scale_file, first->module,
                      *first->global_scale, first->global_scale_file),
          "requantize with sparkulator quantize, which shares one global scale across fused "
          "members (across shards too)");
    }
  }
}

}  // namespace spk::check_internal
