// Whole-file and folder helpers on FileSystem::Default(), for code that reads files no test needs
// to fault (the vLLM source scan, check's own reads, test set-up). Code that reads or writes a
// checkpoint takes a FileSystem* and calls its methods instead (io/file.h), so that
// FaultInjectingFileSystem reaches it.
// Thread safety: free functions with no shared state. Errors: IoError/NotFound Statuses naming the
// path.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spk {

Result<std::string> ReadWholeFile(const std::string& path);
// Creates or truncates `path` and writes `data` (no fsync).
Status WriteWholeFile(const std::string& path, std::string_view data);
Status CopyFile(const std::string& src, const std::string& dst);
// Sorted entry names, as FileSystem::ListDirectory.
Result<std::vector<std::string>> ListDirectory(const std::string& dir);
// True if `path` is a folder (following symlinks).
bool IsDirectory(const std::string& path);
// True if `path` is a regular file (following symlinks).
bool FileExists(const std::string& path);

}  // namespace spk
