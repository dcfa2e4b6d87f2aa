// st_rewrite: a test tool for the interop suite. Reads a .safetensors file with SafetensorsReader
// and writes it again with SafetensorsLayout, keeping metadata, names, dtypes, shapes and bytes.
//
//   st_rewrite [--sort-like-reference] IN OUT
//
// Without the flag the tensors keep IN's data order; with it they are ordered like the reference
// writer (so a file written by Python's safetensors is reproduced byte for byte).
// Exit codes: 0 ok, 2 invalid input or usage, 3 I/O error; the error goes to stderr.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "io/file.h"
#include "safetensors/reader.h"
#include "safetensors/writer.h"

namespace spk {
namespace {

Status Rewrite(const std::string& in, const std::string& out, bool sort_like_reference) {
  FileSystem* fs = FileSystem::Default();
  SPK_ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::Open(fs, in));
  std::vector<TensorSpec> specs;
  for (const TensorEntry& t : reader.header().tensors) specs.push_back({t.name, t.dtype, t.shape});
  if (sort_like_reference) SortLikeReference(specs);
  SPK_ASSIGN_OR_RETURN(SafetensorsLayout layout,
                       SafetensorsLayout::Plan(std::move(specs), reader.header().metadata));
  SPK_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs->CreateForWrite(out));
  SPK_RETURN_IF_ERROR(WriteSafetensorsHeader(*file, layout));
  std::vector<uint8_t> buffer;
  for (const TensorSpec& spec : layout.tensors()) {
    const TensorEntry* entry = reader.header().Find(spec.name);
    buffer.resize(entry->nbytes());
    SPK_RETURN_IF_ERROR(reader.ReadTensor(*entry, buffer));
    SPK_ASSIGN_OR_RETURN(uint64_t offset, layout.AbsoluteOffset(spec.name));
    SPK_RETURN_IF_ERROR(file->WriteAt(offset, buffer));
  }
  return file->Close();
}

}  // namespace
}  // namespace spk

int main(int argc, char** argv) {
  bool sort = false;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sort-like-reference") == 0) {
      sort = true;
    } else {
      paths.emplace_back(argv[i]);
    }
  }
  if (paths.size() != 2) {
    std::fprintf(stderr, "usage: st_rewrite [--sort-like-reference] IN OUT\n");
    return 2;
  }
  spk::Status status = spk::Rewrite(paths[0], paths[1], sort);
  if (!status.ok()) {
    std::fprintf(stderr, "st_rewrite: %s\n", status.message().c_str());
    return spk::ExitCodeFor(status);
  }
  return 0;
}
