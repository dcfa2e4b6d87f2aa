// The registry formats other than pack-quantized (FP8 channel and block, INT8 / W4AFP8, NVFP4,
// MXFP4, MXFP8): their tensors verified by the checkpoint's codec while the view is built
// (VerifyCodecTensors: quant/codec.h Tensors(), names, dtypes, shapes; scale values by one rule per
// scale dtype), NVFP4's global scale shared by fused partners (part of fused-agreement), and the
// kernel rules: pack-quantized-kernels (the WNA16 kernels of the release judged) and format-kernels
// (vLLM 0.32's rules for the format; both by vllm/gemm.h JudgeGemm, the plan's judge, so
// that check and quantize agree).
#include <cmath>
#include <map>

#include "check/check_rules.h"
#include "model/quantized_modules.h"
#include "quant/float_formats.h"
#include "tensor/float_convert.h"
#include "vllm/gemm.h"

namespace spk::check_internal {

// A .weight that holds a quantized module's values is that module's `packed` tensor.
void MarkUnpackedValues(CheckView* v) {
  if (!v->quant.scheme) return;
  const WeightCodec& codec = *v->quant.scheme->scheme->codec;
  if (ValueSuffix(codec) != kWeightSuffix) return;
  auto has = [&](const std::string& name) { return v->tensors.count(name) > 0; };
  for (ModuleEntry& entry : v->modules) {
    const std::string& module = entry.name;
    ModuleTensors& mt = entry.tensors;
    if (!mt.weight) continue;
    const std::string name = module + std::string(kWeightSuffix);
    if (QuantizedModuleOf(codec, name, mt.weight->entry->dtype, has)) {
      mt.packed = mt.weight;
      mt.weight.reset();
    }
  }
}

std::optional<std::pair<int64_t, int64_t>> VerifyCodecTensors(const CheckView& v,
                                                              const std::string& module,
                                                              const ModuleTensors& mt,
                                                              LinearModule* lm,
                                                              FindingList* problems) {
  const CheckpointScheme& scheme = *v.quant.scheme;
  const WeightCodec& codec = *scheme.scheme->codec;
  const QuantParams& p = scheme.params;
  const TensorEntry& values = *mt.packed->entry;
  const std::string file = v.FileOf(*mt.packed);
  const std::string value_name = module + std::string(ValueSuffix(codec));
  if (!mt.scale) {
    problems->Add(FindingCode::kMissingWeightScale, module, file,
                  fmt::format("{}.weight_scale is missing: vLLM does not report it and runs on "
                              "uninitialised memory",
                              module),
                  "requantize the module (or restore the shard that held weight_scale)");
    return std::nullopt;
  }
  const DType dtype = WeightDTypeOfScales(mt.scale->entry->dtype);
  auto dims = WeightDimsFromValues(codec, p, dtype, values.shape);
  if (!dims) {
    problems->Add(
        FindingCode::kQuantTensorShape, module, file,
        fmt::format("{} is {} {}, which no {} weight stores", value_name, DTypeName(values.dtype),
                    ShapeToString(values.shape), scheme.scheme->name),
        "requantize the module");
    return std::nullopt;
  }
  const auto [rows, cols] = *dims;
  bool ok = true;
  std::set<std::string> expected;
  for (const StoredTensor& want : codec.Tensors(p, dtype, rows, cols)) {
    const std::string name = module + std::string(want.suffix);
    expected.insert(name);
    auto it = v.tensors.find(name);
    if (it == v.tensors.end()) {
      problems->Add(
          FindingCode::kMissingQuantTensor, name, file,
          fmt::format("{} is missing: a {} module stores it, and vLLM loads the module without it",
                      name, scheme.scheme->name),
          "requantize the module (or restore the shard that held it)");
      ok = false;
      continue;
    }
    const TensorEntry& got = *it->second.entry;
    if (got.dtype != want.dtype || got.shape != want.shape) {
      problems->Add(
          FindingCode::kQuantTensorShape, name, v.FileOf(it->second),
          fmt::format("{} is {} {}; a [{}, {}] {} weight stores {} {}", name, DTypeName(got.dtype),
                      ShapeToString(got.shape), rows, cols, scheme.scheme->name,
                      DTypeName(want.dtype), ShapeToString(want.shape)),
          "requantize the module");
      ok = false;
      continue;
    }
    if (want.role == TensorRole::kScale) VerifyScaleValues(v, module, it->second, problems);
    if (want.role == TensorRole::kGlobalScale) {
      float gs = 0.0f;
      Status read = v.Reader(it->second).ReadTensor(got, {reinterpret_cast<uint8_t*>(&gs), 4});
      if (!read.ok()) {
        problems->Add(FindingCode::kSafetensorsInvalid, name, v.FileOf(it->second), read.message(),
                      "");
      } else if (!std::isfinite(gs) || gs <= 0.0f) {
        problems->Add(
            FindingCode::kGlobalScaleInvalid, name, v.FileOf(it->second),
            fmt::format("{} is {}; it must be finite and positive (vLLM divides by it)", name, gs),
            "requantize the module from the source weights");
      } else {
        lm->global_scale = gs;
        lm->global_scale_file = v.FileOf(it->second);
      }
    }
  }
  // Quantization tensors of other formats (a zero point in a symmetric scheme, a weight_shape or
  // global scale the format does not have) are parameters vLLM never creates.
  for (auto [suffix, slot] : {std::pair{kShapeSuffix, mt.shape},
                              {kZeroPointSuffix, mt.zero_point},
                              {kGlobalScaleSuffix, mt.global_scale}}) {
    const std::string name = module + std::string(suffix);
    if (slot && !expected.count(name)) {
      problems->Add(
          FindingCode::kUnexpectedQuantTensor, name, v.FileOf(*slot),
          fmt::format("{} is stored, but a {} module has no such parameter: vLLM fails to load "
                      "it",
                      name, scheme.scheme->name),
          "delete the tensor");
    }
  }
  if (!ok) return std::nullopt;
  return dims;
}

namespace {

// Fused vLLM module -> rows of its members.
std::map<std::string, int64_t> FusedOut(const CheckView& v) {
  std::map<std::string, int64_t> fused_out;
  for (const LinearModule& lm : v.linears) fused_out[lm.fused] += lm.out_features;
  return fused_out;
}

}  // namespace

// The registry format's kernel rules (vllm/gemm.h JudgeGemm) for every module with a
// codec_shape, each judged with the rows of its whole fused GEMM.
void FormatKernels(const CheckView& v, FindingSink& sink) {
  if (!v.quant.scheme) return;
  const CheckpointScheme& scheme = *v.quant.scheme;
  std::map<std::string, int64_t> fused_out = FusedOut(v);
  for (const LinearModule& lm : v.linears) {
    if (!lm.codec_shape) continue;
    const auto& [out, in, file] = *lm.codec_shape;
    const GemmGeometry gemm{
        .module = lm.module,
        .vllm_module = lm.fused,
        .out = out,
        .in = in,
        .fused_out = fused_out[lm.fused],
        .parallel = MapParallelStyle(v.map, lm.module),
        .first_built_in = FirstBuiltInWidth(v.family.family, v.config.hidden_size, lm.fused, in),
        .rows_permuted = RowsPermutedForRotary(v.config.architectures, lm.module)};
    if (auto rule =
            JudgeGemm(*scheme.scheme, scheme.params.group_size, gemm, v.options.tp).plan_rule) {
      sink.Add(
          FindingCode::kKernelRule, lm.module, file,
          fmt::format("{} (vLLM module {}) [{}, {}] at --tp {}: {}", lm.module, lm.vllm_name, out,
                      in, v.options.tp, *rule),
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
void PackQuantizedKernels(const CheckView& v, FindingSink& sink) {
  // The routed experts vLLM builds under the config's scheme, stored or not (quantize refuses
  // the scheme for them: vllm/map_rules.h MoeRefusalFor).
  if (v.quant.scheme && v.quant.scheme->scheme != nullptr) {
    if (auto refusal = MoeRefusalFor(v.map, *v.quant.scheme->scheme)) {
      sink.Add(FindingCode::kKernelRule, refusal->experts, "config.json", refusal->message,
               "requantize with " + refusal->fix);
    }
  }
  const std::map<std::string, int64_t> fused_out = FusedOut(v);
  const bool padded =
      CompareVllmVersions(v.vllm.version, *ParseVllmVersion(kFirstPaddedMarlinVllm)) >= 0;
  for (const LinearModule& lm : v.linears) {
    if (!lm.packed_shape) continue;
    const LinearModule::PackedShape& s = *lm.packed_shape;
    const QuantScheme* row =
        FindSchemeFor("pack-quantized", "int", s.bits, s.symmetric,
                      StrategyName(WeightStrategy::kGroupOrChannel, s.group_size));
    if (row == nullptr) continue;
    auto it = fused_out.find(lm.fused);
    const GemmJudgement j = JudgeGemm(*row, s.group_size,
                                      {.module = lm.module,
                                       .vllm_module = lm.fused,
                                       .out = s.out,
                                       .in = s.in,
                                       .fused_out = it == fused_out.end() ? 0 : it->second,
                                       .parallel = MapParallelStyle(v.map, lm.module),
                                       .first_built_in = FirstBuiltInWidth(
                                           v.family.family, v.config.hidden_size, lm.fused, s.in)},
                                      v.options.tp);
    const std::string shape = fmt::format("[{}, {}] at --tp {}", s.out, s.in, v.options.tp);
    const std::string keep = "keep the module dense (ignore it) or use another group size / --tp";
    if (!padded) {
      if (j.plan_rule) {
        AddWna16KernelFinding(
            v, sink, FindingCode::kKernelRule, lm.module, s.file,
            fmt::format("{}: {}; vLLM {} has no kernel for it (check takes Marlin's zero-padded "
                        "tiles from vLLM {} on)",
                        shape, *j.plan_rule, v.vllm.version.text, kFirstPaddedMarlinVllm),
            keep);
      }
      continue;
    }
    if (j.row->cuda_rule == nullptr) continue;
    const std::string where = fmt::format("{} (vLLM module {})", shape, lm.fused);
    if (j.split) {
      sink.Add(FindingCode::kKernelRule, lm.module, s.file,
               fmt::format("{}: {}; vLLM cannot shard it", where, *j.split), keep);
    } else if (j.cuda && (j.cpu || !j.row->cpu_runs_format)) {
      AddWna16KernelFinding(
          v, sink, FindingCode::kKernelRule, lm.module, s.file,
          fmt::format("{}: no vLLM {} kernel takes it; on CUDA vLLM raises \"{}\"; on the CPU "
                      "build \"{}\"",
                      where, v.vllm.version.text, *j.cuda, j.cpu.value_or("")),
          keep);
    } else if (j.cuda) {
      AddWna16KernelFinding(
          v, sink, FindingCode::kKernelRulePlatform, lm.module, s.file,
          fmt::format("{}: vLLM {} loads it only on the CPU build (CPUWNA16LinearKernel); on CUDA "
                      "GPUs it raises \"{}\"",
                      where, v.vllm.version.text, *j.cuda),
          "to serve it on a GPU, keep the module dense (sparkulator quantize does)");
    } else if (j.cpu && j.row->cpu_runs_format) {
      AddWna16KernelFinding(
          v, sink, FindingCode::kKernelRulePlatform, lm.module, s.file,
          fmt::format("{}: vLLM {} loads it on CUDA GPUs (MarlinLinearKernel zero-pads the tiles), "
                      "but its CPU build raises \"{}\"",
                      where, v.vllm.version.text, *j.cpu),
          "to serve it on vLLM's CPU build, keep the module dense (sparkulator quantize does)");
    }
  }
}

void AddWna16KernelFinding(const CheckView& v, FindingSink& sink, FixedCode code,
                           std::string module, std::string file, std::string message,
                           std::string fix) {
  const ModuleMap* map = v.map.map;
  const bool skips = map != nullptr && map->wna16_batch_invariant_needs_no_kernel();
  if (v.options.vllm_batch_invariant && skips) {
    sink.Add(
        FindingCode::kVllmBatchInvariantNoKernel, std::move(module), std::move(file),
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
  } else if (v.options.vllm_batch_invariant) {
    const std::string& refusal = map != nullptr ? map->batch_invariant.evidence : "";
    fix += map != nullptr && map->batch_invariant.probed
               ? fmt::format(
                     "; VLLM_BATCH_INVARIANT=1 is no way around it on vLLM {}: it still "
                     "chooses a kernel (\"{}\")",
                     map->release, refusal.substr(0, refusal.find('\n')))
               : fmt::format(
                     "; VLLM_BATCH_INVARIANT=1 is not known to avoid it on vLLM {} (no "
                     "module map of that release records it)",
                     v.vllm.version.text);
  }
  sink.Add(code, std::move(module), std::move(file), std::move(message), std::move(fix));
}

void GlobalScaleAgreement(const std::vector<const LinearModule*>& members, const std::string& fused,
                          FindingSink& sink) {
  const LinearModule* first = nullptr;
  for (const LinearModule* m : members) {
    if (!m->global_scale) continue;
    if (first == nullptr) {
      first = m;
    } else if (*m->global_scale != *first->global_scale) {
      sink.Add(FindingCode::kGlobalScaleDiffers, fused, m->global_scale_file,
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
