// The flags of every command that writes a checkpoint through CheckpointWriter (quantize,
// dequantize), declared once so that their help reads the same everywhere.
#include "commands.h"

namespace spk::cli {

void AddWriteFlags(CLI::App* sub, int* threads, bool* no_fsync) {
  sub->add_option("--threads", *threads, "Worker threads (0 = all cores)")->capture_default_str();
  sub->add_flag("--no-fsync", *no_fsync,
                "Do not wait for the output to reach the disk (as cp does): faster when the "
                "output fits in free memory, but a power loss soon after can leave DST with "
                "missing data. By default every file is fsynced before the final rename");
}

}  // namespace spk::cli
