// The vLLM module maps compiled into the binary: one JSON text per vLLM release, as
// tools/vllm_module_map/generate.py wrote it into data/vllm_module_map/ (the build embeds them,
// cmake/embed_files.cmake), named "vllm-<release>.json". Only vllm/vllm_module_map.cc reads
// them.
#pragma once

#include <vector>

#include "base/embedded_file.h"

namespace spk {

// In file-name order; vllm_module_map.cc sorts them by version.
const std::vector<EmbeddedFile>& EmbeddedModuleMaps();

}  // namespace spk
