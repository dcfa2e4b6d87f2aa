// The vLLM module maps compiled into the binary: one JSON text per vLLM release, as
// tools/vllm_module_map/generate.py wrote it into data/vllm_module_map/ (the build embeds them,
// cmake/embed_module_maps.cmake). Only checkpoint/vllm_module_map.cc reads them.
#pragma once

#include <string_view>
#include <vector>

namespace spk {

struct EmbeddedModuleMap {
  std::string_view release;  // "0.33.0"
  std::string_view json;     // the file's text
};

// In file-name order; vllm_module_map.cc sorts them by version.
const std::vector<EmbeddedModuleMap>& EmbeddedModuleMaps();

}  // namespace spk
