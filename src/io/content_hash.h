// Content hashes of files and bytes: XXH3-128 (libxxhash), written as 32 lowercase hex digits.
// Used where a file must be recognised as the very one written before (quantize --resume's
// record of each finished shard); not a cryptographic hash.
//
// Pure functions; thread-safe. Errors: HashFile returns the FileSystem's error (NotFound, IoError)
// with the path.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "io/file.h"

namespace spk {

// The hash of `bytes`.
std::string ContentHash(std::string_view bytes);

// Whether `text` is a hash as these functions write it (32 lowercase hex digits).
bool IsContentHash(std::string_view text);

// The hash of the whole file at `path`, read in blocks through `fs`.
Result<std::string> HashFile(FileSystem* fs, const std::string& path);

}  // namespace spk
