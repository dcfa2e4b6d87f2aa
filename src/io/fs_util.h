// Small whole-file and folder helpers on the local POSIX file system (config.json, tokenizer files,
// index files, copying the files that a quantized checkpoint keeps unchanged).
// Thread safety: free functions with no shared state. Errors: IoError/NotFound Statuses naming the
// path.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spk {

Result<std::string> ReadWholeFile(const std::string& path);
// Creates or truncates `path` and writes `data` (no fsync; AtomicOutputDir::Commit syncs).
Status WriteWholeFile(const std::string& path, std::string_view data);
// Copies the bytes of `src` to `dst` (created or truncated), in the kernel where possible
// (copy_file_range), falling back to read/write.
Status CopyFile(const std::string& src, const std::string& dst);
// Names of the entries of `dir` (files and folders), sorted bytewise, without "." and "..".
Result<std::vector<std::string>> ListDirectory(const std::string& dir);
// True if `path` is a folder (following symlinks).
bool IsDirectory(const std::string& path);
// True if `path` is a regular file (following symlinks).
bool FileExists(const std::string& path);

}  // namespace spk
