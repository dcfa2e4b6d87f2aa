// A text file compiled into the binary (cmake/embed_files.cmake writes the tables): data the
// binary must not look for at run time. Each table is owned by the layer that embeds it (vLLM's
// module maps: vllm/vllm_module_map_data.h; the map generator: check/vllm_map_build.cc).
// Static storage, immutable, thread-safe; no errors.
#pragma once

#include <string_view>

namespace spk {

struct EmbeddedFile {
  std::string_view name;  // the path relative to the embedded folder, e.g. "vllm-0.33.0.json"
  std::string_view text;  // the file's bytes
};

}  // namespace spk
