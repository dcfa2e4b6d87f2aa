// `check CKPT --vllm DIR`: vLLM's module map built by that tree itself. The generator the
// repository's maps come from (tools/vllm_module_map/, embedded in the binary) runs in a Python
// that imports DIR's vLLM, for the checkpoint's architectures only (about 15 s: importing vLLM is
// most of it), so that a release or a patched tree no committed map describes is judged by what
// it builds.
//
// Which Python, and how: `python` when given; else, for an installed build (DIR holds a compiled
// vllm/_C*.so), the interpreter of the virtual environment DIR belongs to (DIR =
// <venv>/lib/pythonX.Y/site-packages) or python3 on PATH, with DIR first on PYTHONPATH; for
// Python code alone (a source checkout, a wheel unzipped) python3 with the CUDA platform faked,
// as the generator does for a release with no CPU build. The generator's files are written to a
// temporary folder, removed afterwards.
//
// Thread-safe (no shared state). Errors: Unavailable when the map cannot be built (no Python, vLLM
// or torch does not import, the generator fails or runs past `timeout`), with the command and the
// last lines of its stderr; InvalidInput when what it printed is not a map; IoError from the
// temporary folder. The caller decides what a failure means (check falls back to the compiled-in
// maps with a warning).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/file.h"
#include "vllm/vllm_module_map.h"

namespace spk {

struct TreeMapRequest {
  std::string vllm_dir;                    // as `check --vllm` takes it
  std::string python;                      // "" = chosen as above
  std::vector<std::string> architectures;  // the generator's --only list; never empty
  std::chrono::seconds timeout{600};
};

struct TreeMap {
  ModuleMap map;
  std::string built_by;  // "python3 (CUDA capability 90 faked)", for the report
  std::string json;      // the map as the generator printed it (check --vllm-map-out)
};

Result<TreeMap> BuildModuleMapFromTree(FileSystem* fs, const TreeMapRequest& request);

// The architectures a check of `config` needs from a map: config.json's, and those the newest
// compiled-in map says vLLM builds for it (its MTP layers' draft, a speculators format's).
std::vector<std::string> ArchitecturesToMap(const ModelConfig& config);

}  // namespace spk
