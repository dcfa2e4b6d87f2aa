#include "io/fs_util.h"

#include "io/file.h"

namespace spk {

Result<std::string> ReadWholeFile(const std::string& path) {
  return FileSystem::Default()->ReadFile(path);
}

Status WriteWholeFile(const std::string& path, std::string_view data) {
  return FileSystem::Default()->WriteFile(path, data);
}

Status CopyFile(const std::string& src, const std::string& dst) {
  return FileSystem::Default()->CopyFile(src, dst);
}

Result<std::vector<std::string>> ListDirectory(const std::string& dir) {
  return FileSystem::Default()->ListDirectory(dir);
}

bool IsDirectory(const std::string& path) { return FileSystem::Default()->IsDirectory(path); }

bool FileExists(const std::string& path) { return FileSystem::Default()->FileExists(path); }

}  // namespace spk
