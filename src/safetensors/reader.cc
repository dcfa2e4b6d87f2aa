#include "safetensors/reader.h"

#include "base/checked_math.h"
#include "base/endian.h"

namespace spk {

Result<SafetensorsReader> SafetensorsReader::Open(FileSystem* fs, const std::string& path) {
  SPK_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, fs->OpenForRead(path));
  const uint64_t file_size = file->size();
  if (file_size < 8) {
    return Status::InvalidInput(path + ": file is " + std::to_string(file_size) +
                                " bytes, too short for the 8-byte header length of a safetensors "
                                "file (is it truncated?)");
  }
  uint8_t prefix[8];
  SPK_RETURN_IF_ERROR(file->ReadAt(0, prefix));
  const uint64_t n = LoadLE64(prefix);
  if (n > kMaxSafetensorsHeaderSize) {
    return Status::InvalidInput(path + ": header length " + std::to_string(n) +
                                " is larger than the limit of 100000000 bytes; this is not a "
                                "safetensors file or it is corrupt");
  }
  if (8 + n > file_size) {
    return Status::InvalidInput(path + ": header length " + std::to_string(n) +
                                " runs past the end of the file (" + std::to_string(file_size) +
                                " bytes); the file is truncated or not a safetensors file");
  }
  std::string json(n, '\0');
  SPK_RETURN_IF_ERROR(
      file->ReadAt(8, std::span<uint8_t>(reinterpret_cast<uint8_t*>(json.data()), json.size())));
  SPK_ASSIGN_OR_RETURN(SafetensorsHeader header, ParseSafetensorsHeader(path, json, file_size));
  return SafetensorsReader(std::move(file), std::move(header));
}

Status SafetensorsReader::ReadTensor(const TensorEntry& t, std::span<uint8_t> out) const {
  if (out.size() != t.nbytes()) {
    return Status::Internal(path() + ": tensor '" + t.name + "': read buffer of " +
                            std::to_string(out.size()) + " bytes for a tensor of " +
                            std::to_string(t.nbytes()));
  }
  return ReadTensorBytes(t, 0, out);
}

namespace {

// Internal error unless [byte_offset, byte_offset + length) lies inside tensor `t`.
Status CheckSlice(const std::string& path, const TensorEntry& t, uint64_t byte_offset,
                  uint64_t length) {
  uint64_t slice_end;
  if (!CheckedAdd(byte_offset, length, &slice_end) || slice_end > t.nbytes()) {
    return Status::Internal(path + ": tensor '" + t.name + "': slice at byte " +
                            std::to_string(byte_offset) + " of " + std::to_string(length) +
                            " bytes lies outside its " + std::to_string(t.nbytes()) + " bytes");
  }
  return Status::Ok();
}

}  // namespace

Status SafetensorsReader::ReadTensorBytes(const TensorEntry& t, uint64_t byte_offset,
                                          std::span<uint8_t> out) const {
  SPK_RETURN_IF_ERROR(CheckSlice(path(), t, byte_offset, out.size()));
  return file_->ReadAt(header_.data_start + t.begin + byte_offset, out)
      .WithContext("tensor '" + t.name + "'");
}

Result<FileView> SafetensorsReader::ViewTensorBytes(const TensorEntry& t, uint64_t byte_offset,
                                                    uint64_t length) const {
  SPK_RETURN_IF_ERROR(CheckSlice(path(), t, byte_offset, length));
  Result<FileView> view = file_->View(header_.data_start + t.begin + byte_offset, length);
  if (!view.ok()) return view.status().WithContext("tensor '" + t.name + "'");
  return view;
}

Status SafetensorsReader::CopyTensorBytes(const TensorEntry& t, uint64_t byte_offset,
                                          uint64_t length, WritableFile& out,
                                          uint64_t offset) const {
  SPK_RETURN_IF_ERROR(CheckSlice(path(), t, byte_offset, length));
  return out.CopyFrom(offset, *file_, header_.data_start + t.begin + byte_offset, length)
      .WithContext("tensor '" + t.name + "'");
}

}  // namespace spk
