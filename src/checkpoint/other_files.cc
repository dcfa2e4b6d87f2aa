#include "checkpoint/other_files.h"

#include <fmt/format.h>

#include "safetensors/index.h"

namespace spk {

Result<std::vector<std::string>> CopyOtherFiles(FileSystem* fs, const std::string& src_dir,
                                                CheckpointWriter* out,
                                                std::vector<std::string>* warnings) {
  SPK_ASSIGN_OR_RETURN(auto names, fs->ListDirectory(src_dir));
  std::vector<std::string> copied;
  for (const std::string& name : names) {
    if (name == "config.json" || name == kShardIndexFileName || name.ends_with(".safetensors")) {
      continue;
    }
    std::string from = src_dir + "/" + name;
    if (fs->IsDirectory(from)) {
      warnings->push_back(fmt::format("{}: sub-folder not copied", from));
      continue;
    }
    out->AddCopy(from, name);
    copied.push_back(name);
  }
  return copied;
}

}  // namespace spk
