// The rows of --threads and --no-fsync (tools/command_flags.h), shared by quantize and dequantize
// and their Python functions, so that their help reads the same everywhere.
#include "command_flags.h"

namespace spk::cli {
namespace {

constexpr OptionRow<WriteFlags> kWriteRows[] = {
    {"--threads", "threads", ParamType::kOptionalInt, "None", "Worker threads (0 = all cores)",
     &WriteFlags::threads, /*shows_default=*/true},
    {"--no-fsync", "fsync", ParamType::kBool, "True",
     "Do not wait for the output to reach the disk (as cp does): faster when the output fits in "
     "free memory, but a power loss soon after can leave DST with missing data. By default every "
     "file is fsynced before the final rename (fsync=False in Python)",
     &WriteFlags::fsync},
};

}  // namespace

std::span<const OptionRow<WriteFlags>> WriteOptionRows() { return kWriteRows; }

}  // namespace spk::cli
