// Reading the Python source of a vLLM tree the way `check` needs it: where its model files are,
// their lines, and which uses of an expression run outside an `if` guard (so that `check` does not
// flag code that vLLM already guards, e.g. qwen3_dflash.py 0.32 reading qkv_proj.weight only when
// every qkv_proj is unquantized).
//
// The guard test is textual, not a Python parser: a use is guarded when an enclosing `if`/`elif`
// header (all its lines, up to the colon) names the guard and does not negate it with `not`; the
// walk stops at the enclosing `def` or `class`. Pure functions over the files of the FileSystem
// they are given (FaultInjectingFileSystem reaches every read); thread-safe.
// Errors: NotFound when DIR holds no vllm/model_executor/models; IoError from reading.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "io/file.h"

namespace spk {

// DIR/vllm/model_executor/models, or DIR/model_executor/models when DIR is the package itself.
Result<std::string> VllmModelsDir(FileSystem* fs, const std::string& dir);

std::vector<std::string> SplitSourceLines(const std::string& text);

// The lines of model file `name` ("qwen3_dflash.py") in the tree, or nullopt when the tree has no
// such file.
Result<std::optional<std::vector<std::string>>> ReadVllmModelFile(FileSystem* fs,
                                                                  const std::string& dir,
                                                                  std::string_view name);

// 1-based numbers of the lines that contain `needle` outside every enclosing `if` guard naming
// `guard` (see the header comment).
std::vector<size_t> UnguardedLines(const std::vector<std::string>& lines, std::string_view needle,
                                   std::string_view guard);

// 1-based numbers of all lines that contain `needle`.
std::vector<size_t> LinesContaining(const std::vector<std::string>& lines, std::string_view needle);

}  // namespace spk
