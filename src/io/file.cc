#include "io/file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>

namespace spk {

RandomAccessFile::~RandomAccessFile() = default;

Result<FileView> RandomAccessFile::View(uint64_t offset, uint64_t length) const {
  if (length > std::numeric_limits<size_t>::max()) {
    return Status::IoError("cannot read " + path() + ": " + std::to_string(length) +
                           " bytes do not fit in memory");
  }
  // Not zero-filled: ReadAt overwrites every byte or fails.
  std::unique_ptr<uint8_t[]> bytes(new uint8_t[static_cast<size_t>(length)]);
  SPK_RETURN_IF_ERROR(ReadAt(offset, {bytes.get(), static_cast<size_t>(length)}));
  return FileView::Owned(std::move(bytes), static_cast<size_t>(length));
}
WritableFile::~WritableFile() = default;
void WritableFile::StartWriteback(uint64_t /*offset*/, uint64_t /*length*/) {}

Status WritableFile::CopyFrom(uint64_t offset, const RandomAccessFile& source,
                              uint64_t source_offset, uint64_t length) {
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  // Not zero-filled: ReadAt overwrites every byte it returns or fails.
  std::unique_ptr<uint8_t[]> chunk(new uint8_t[std::min(length, kChunk)]);
  for (uint64_t done = 0; done < length;) {
    const std::span<uint8_t> bytes(chunk.get(), std::min(length - done, kChunk));
    SPK_RETURN_IF_ERROR(source.ReadAt(source_offset + done, bytes));
    SPK_RETURN_IF_ERROR(WriteAt(offset + done, bytes));
    done += bytes.size();
  }
  return Status::Ok();
}
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

Status FileSystem::CreateDirectories(const std::string& path) {
  if (path.empty() || IsDirectory(path)) return Status::Ok();
  if (Exists(path)) return Status::IoError("cannot create folder " + path + ": not a folder");
  std::string parent = Dirname(path);
  if (!parent.empty() && parent != path) {
    SPK_RETURN_IF_ERROR(CreateDirectories(parent).WithContext("cannot create folder " + path));
  }
  Status made = CreateDirectory(path);
  if (made.code() == StatusCode::kAlreadyExists && IsDirectory(path)) return Status::Ok();
  return made;
}

std::string Basename(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

std::string Dirname(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return "";
  size_t end = path.find_last_not_of('/', slash);
  return end == std::string::npos ? "/" : path.substr(0, end + 1);
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace spk
