#include "checkpoint/other_files.h"

#include <fmt/format.h>

#include "io/fs_util.h"
#include "safetensors/index.h"

namespace spk {

Result<std::vector<std::string>> CopyOtherFiles(const std::string& src_dir,
                                                const std::string& dst_dir,
                                                std::vector<std::string>* warnings) {
  SPK_ASSIGN_OR_RETURN(auto names, ListDirectory(src_dir));
  std::vector<std::string> copied;
  for (const std::string& name : names) {
    if (name == "config.json" || name == kShardIndexFileName || name.ends_with(".safetensors")) {
      continue;
    }
    std::string from = src_dir + "/" + name;
    if (IsDirectory(from)) {
      warnings->push_back(fmt::format("{}: sub-folder not copied", from));
      continue;
    }
    SPK_RETURN_IF_ERROR(CopyFile(from, dst_dir + "/" + name));
    copied.push_back(name);
  }
  return copied;
}

}  // namespace spk
