// libFuzzer target: `sparkulator check --vllm DIR` reads Python source from a vLLM tree the user
// names, finds the unguarded qkv_proj.weight reads (check/vllm_code.h) and writes patches as
// unified diffs (check/vllm_source.h). Whatever the file holds (no newline at the end, CRLF, tabs,
// a guard header that never closes, a `def` at any depth), the scan and the patch must not crash,
// hang or read out of bounds; every reported line number lies inside the file and every patch is a
// diff of that file. The input is written as the tree's laguna_dflash.py (the file both patches
// apply to) in a temporary folder made once per process.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "check/vllm_code.h"
#include "check/vllm_source.h"
#include "io/file.h"

namespace {

// DIR of a tree DIR/vllm/model_executor/models/, made once.
const std::string& Tree() {
  static const std::string tree = [] {
    char pattern[] = "/tmp/spk-vllm-source-fuzz-XXXXXX";
    if (mkdtemp(pattern) == nullptr) std::abort();
    spk::FileSystem* fs = spk::FileSystem::Default();
    std::string dir = pattern;
    for (const char* part : {"/vllm", "/model_executor", "/models"}) {
      dir += part;
      if (!fs->CreateDirectory(dir).ok()) std::abort();
    }
    return std::string(pattern);
  }();
  return tree;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> lines = spk::SplitSourceLines(text);
  for (size_t line : spk::UnguardedLines(lines, "qkv_proj.weight", "UnquantizedLinearMethod")) {
    if (line == 0 || line > lines.size()) std::abort();
  }
  for (size_t line : spk::LinesContaining(lines, "qkv_proj.weight")) {
    if (line == 0 || line > lines.size()) std::abort();
  }
  spk::FileSystem* fs = spk::FileSystem::Default();
  const std::string file = Tree() + "/vllm/model_executor/models/laguna_dflash.py";
  if (!fs->WriteFile(file, text).ok()) std::abort();
  auto findings = spk::InspectVllmSource(fs, Tree());
  if (!findings.ok()) std::abort();  // the tree is there and readable: the scan cannot fail
  const std::string rel = "vllm/model_executor/models/laguna_dflash.py";
  for (const spk::Finding& f : *findings) {
    if (f.file != rel) std::abort();
    if (f.fix.starts_with("---") && !f.fix.starts_with("--- a/" + rel + "\n")) std::abort();
  }
  return 0;
}
