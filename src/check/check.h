// `sparkulator check`: will vLLM load this checkpoint, and load it right?
//
// CheckCheckpoint reads a checkpoint folder the way vLLM does (only the shards the index names;
// module names with the `model.` prefix, fused q/k/v and gate/up, the draft's layer offset;
// `ignore` and `targets` matched with Python re.match semantics, with and without fused-name
// expansion; docs/vllm.md) and returns every problem it finds as a Finding (check/findings.h):
// loading errors, silent misses, broken tensors and scales, kernel-rule violations, config keys old
// compressed-tensors releases reject, and, with a target, the draft/target pairing. It never stops
// at the first problem: a malformed shard is a finding and the rest is still checked.
//
// The rules reuse the library's own: vllm/family.h naming, vllm/module_pattern.h
// DecideIgnore, vllm/vllm_build.h DecideVllmBuild (the plan's decision), vllm/gemm.h
// JudgeGemm, model/quant_config.h, quant/scheme.h shapes and, for the other registry formats,
// their codec's tensors (check_formats.cc). Reads headers, weight_shape, weight_scale and
// weight_global_scale tensors only (bounded memory). Thread safety: call from one thread; no shared
// state. Findings that depend on the vLLM release (DFlash q/k/v, Laguna names, EAGLE-3 aux layers)
// are judged for the vLLM of CheckOptions (check/draft_rules.h), and the report says which. Every
// file is read through the FileSystem given to CheckCheckpoint. Errors: the Result fails when the
// checkpoint (or the target, or the vLLM tree) cannot be found or the options are bad (NotFound,
// Usage), and when the folder, its index, a shard or config.json cannot be read (IoError naming the
// file: a disk that does not give the files back says nothing about the checkpoint, so no report is
// made); everything wrong inside the files is a Finding.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "check/findings.h"
#include "io/file.h"
#include "io/run_context.h"

namespace spk {

struct CheckOptions {
  std::string checkpoint;  // folder or "org/name" in the local Hugging Face cache
  std::string target;      // empty: no pairing checks; else the target model (folder or repo id)
  int tp = 1;              // tensor-parallel size the kernel rules are checked for
  std::optional<int64_t> target_layers;  // the target's layer count, if config.json lacks it
  // The vLLM the version-dependent rules (check/vllm_rules.h) are judged for: vllm_dir (an
  // installed site-packages or a source tree: its version and its model code decide), else
  // vllm_version, else the release of the newest module map (DefaultVllmRelease), as quantize.
  std::string vllm_version;
  std::string vllm_dir;
  // What vLLM builds as a quantized Linear (vllm/vllm_module_map.h) comes from, in order:
  // vllm_module_map (a map file, tools/vllm_module_map/generate.py --print in the user's vLLM);
  // with vllm_dir and build_map_from_tree, the map that tree builds (check/vllm_map_build.h,
  // run with vllm_python when given; when it cannot be built, the compiled-in maps with the
  // finding vllm-map-not-built); else the compiled-in map of the release judged.
  std::string vllm_module_map;
  bool build_map_from_tree = true;
  std::string vllm_python;
  // Where the map built from vllm_dir is written as the generator printed it ("" = nowhere), so
  // that it can be compared with a committed map (tests/python/test_load_probe_releases.py).
  std::string vllm_map_out;
  // The checkpoint is served with VLLM_BATCH_INVARIANT=1. Where the judged release's module map
  // says a WNA16 Linear then loads without kernel selection (vLLM 0.33), the WNA16 kernel shape
  // findings (no-vllm-kernel, kernel-rule, kernel-rule-platform) become the info finding
  // vllm-batch-invariant-no-kernel; elsewhere it changes only no-vllm-kernel's fix text.
  bool vllm_batch_invariant = false;
  std::function<void(const std::string&)> notice;  // told before a long step (building a map)
};

struct CheckReport {
  std::string path;
  std::string family;               // "dflash", "eagle3", "mtp", "llm"
  std::string naming;               // VllmNaming::ToString()
  std::string scheme;               // "w4a16 (group 128)", or "dense" without quantization_config
  std::vector<std::string> shards;  // the shard files vLLM loads
  size_t quantized_modules = 0;     // Linear modules stored quantized (any registry format)
  size_t dense_linear_modules = 0;  // Linear modules stored as .weight
  std::string vllm_version;         // the vLLM release the findings are judged for
  std::string vllm_version_source;  // "--vllm-version", the file it was read from, or the default
  std::string vllm_tree;            // the vLLM tree whose model code was read, if any
  std::string module_map;           // the release of the module map that judged it ("0.33.0")
  std::string module_map_source;    // "compiled in", the map file, or what built it from the tree
  std::string module_map_architecture;  // the map's architecture for it, if the map knows it
  std::string serve;                    // the `vllm serve` line that fits
  std::vector<Finding> findings;
  // Shards whose header could not be read, and the rules that therefore did not run (those that
  // judge the set of stored tensors, which would call that shard's tensors missing).
  std::vector<std::string> unreadable_shards;
  std::vector<std::string> rules_not_run;
  bool ok() const { return CountSeverity(findings, Severity::kError) == 0; }
};

Result<CheckReport> CheckCheckpoint(const RunContext& run, const CheckOptions& options);

nlohmann::ordered_json CheckReportToJson(const CheckReport& report);
std::string RenderCheckReport(const CheckReport& report);

}  // namespace spk
