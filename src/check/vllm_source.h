// `sparkulator check --vllm DIR`: looks into an installed vLLM's Python source for the known
// blockers of quantized drafts and returns each as a Finding whose `fix` is a unified diff
// (apply with `patch -p1` in the folder that holds the `vllm` package):
//   - DFlash's context K/V path (`_build_context_kv_buffers` in the *dflash*.py models) reads
//     `qkv_proj.weight`, which a pack-quantized layer does not have (vllm#51581); the patch reads a
//     dequantized copy of the K/V rows instead. A read under an `UnquantizedLinearMethod` guard
//     (qwen3_dflash.py in vLLM 0.32, which projects quantized layers through their quant method)
//     is not reported; laguna_dflash.py 0.32 reads it directly and is.
// Two parts, kept apart: the scan (which files and lines are unguarded; check/vllm_code.h and the
// rule table of check/vllm_rules.h) and the patch text (PatchContextKv, PatchGetCacheScale,
// UnifiedDiff in vllm_source.cc).
//   - laguna_dflash.py calls `quant_config.get_cache_scale(...)`, which only some quantization
//     configs define (FP8); the patch looks the method up and skips the call when it is absent.
// Reads files only, through the FileSystem it is given. Thread-safe (no shared state). Errors:
// NotFound when DIR holds no vLLM model_executor/models folder; IoError from reading.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "check/findings.h"
#include "io/file.h"

namespace spk {

Result<std::vector<Finding>> InspectVllmSource(FileSystem* fs, const std::string& dir);

// A unified diff ("--- a/<path>", "+++ b/<path>", hunks with 3 lines of context) that turns
// `before` into `after`, both given as lines without newlines. Empty when they are equal.
// Exposed for tests.
std::string UnifiedDiff(const std::string& path, const std::vector<std::string>& before,
                        const std::vector<std::string>& after);

}  // namespace spk
