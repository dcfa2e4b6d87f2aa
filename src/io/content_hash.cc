#include "io/content_hash.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

namespace spk {
namespace {

constexpr uint64_t kReadBlock = 8u << 20;

std::string Hex(XXH128_hash_t h) {
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return out;
}

}  // namespace

std::string ContentHash(std::string_view bytes) {
  return Hex(XXH3_128bits(bytes.data(), bytes.size()));
}

bool IsContentHash(std::string_view text) {
  if (text.size() != 32) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<std::string> HashFile(FileSystem* fs, const std::string& path) {
  SPK_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, fs->OpenForRead(path));
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  if (state == nullptr || XXH3_128bits_reset(state.get()) != XXH_OK) {
    return Status::Internal("cannot start a content hash of " + path);
  }
  std::vector<uint8_t> block(std::min<uint64_t>(kReadBlock, std::max<uint64_t>(file->size(), 1)));
  for (uint64_t offset = 0; offset < file->size(); offset += block.size()) {
    std::span<uint8_t> part(block.data(), std::min<uint64_t>(block.size(), file->size() - offset));
    SPK_RETURN_IF_ERROR(file->ReadAt(offset, part));
    XXH3_128bits_update(state.get(), part.data(), part.size());
  }
  return Hex(XXH3_128bits_digest(state.get()));
}

}  // namespace spk
