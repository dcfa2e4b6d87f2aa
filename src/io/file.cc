#include "io/file.h"

#include <cerrno>
#include <cstring>

namespace spk {

RandomAccessFile::~RandomAccessFile() = default;
WritableFile::~WritableFile() = default;
void WritableFile::StartWriteback(uint64_t /*offset*/, uint64_t /*length*/) {}
FileSystem::~FileSystem() = default;

Status IoErrorFromErrno(const std::string& what, const std::string& path, int err) {
  if (err == ENOSPC || err == EDQUOT) {
    return Status::IoError("disk full while writing " + path + ": free some space and run again");
  }
  return Status::IoError(what + " " + path + ": " + std::strerror(err));
}

Status ShortReadError(const std::string& path, uint64_t offset, uint64_t length,
                      uint64_t file_end) {
  return Status::IoError("unexpected end of file in " + path + ": needed bytes [" +
                         std::to_string(offset) + ", " + std::to_string(offset + length) +
                         ") but the file ends at byte " + std::to_string(file_end) +
                         " (was it truncated or is it still being written?)");
}

}  // namespace spk
