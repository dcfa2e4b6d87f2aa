// `sparkulator version`: prints the tool's version (from the CMake project version) and the
// compressed-tensors release whose format it writes.
#include <cstdio>

#include "base/version.h"
#include "commands.h"
#include "model/quant_config.h"

namespace spk::cli {

void AddVersionCommand(CLI::App& app, CommandBody* run) {
  CLI::App* sub = app.add_subcommand("version", "Print the version of sparkulator");
  sub->callback([run] {
    *run = [] {
      std::printf("sparkulator %s\nwrites compressed-tensors %s checkpoints (pack-quantized)\n",
                  kSparkulatorVersion, kCompressedTensorsVersion);
      return 0;
    };
  });
}

int ReportError(const Status& status) {
  std::fprintf(stderr, "sparkulator: error: %s\n", status.message().c_str());
  return ExitCodeFor(status);
}

}  // namespace spk::cli
