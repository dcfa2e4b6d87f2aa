// The `sparkulator` command line: registers the subcommands and runs the chosen one. main.cc calls
// it for the binary, the Python module (python/src/module.cc) for the `sparkulator` console script,
// so both are the same program. Error policy: a subcommand reports through its exit code
// (docs/design.md, "Errors"); an exception that escapes one is a bug, reported as "internal error"
// with exit 70.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "base/status.h"
#include "base/version.h"
#include "commands.h"

namespace spk::cli {
namespace {

// The exit of an exception that escaped a subcommand: exit 70 (StatusCode::kInternal).
int InternalError(const std::string& what) {
  std::fflush(stdout);
  return ReportError(Status::Internal("internal error: " + what +
                                      " (a bug in sparkulator; please report it with the command "
                                      "line that caused it)"));
}

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{
      "sparkulator: quantize speculative-decoding drafts and Hugging Face safetensors checkpoints "
      "into\n"
      "vLLM-ready compressed-tensors checkpoints, check them, and benchmark them on a live "
      "server."};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", std::string("sparkulator ") + spk::kSparkulatorVersion);

  spk::cli::CommandBody run;
  spk::cli::AddQuantizeCommand(app, &run);
  spk::cli::AddInspectCommand(app, &run);
  spk::cli::AddCheckCommand(app, &run);
  spk::cli::AddCompareCommand(app, &run);
  spk::cli::AddDequantizeCommand(app, &run);
  spk::cli::AddMergeCommand(app, &run);
  spk::cli::AddExampleCommand(app, &run);
  spk::cli::AddVersionCommand(app, &run);
  spk::cli::AddBenchCommand(app, &run);
  spk::cli::AddCardCommand(app, &run);

  int code = 2;
  try {
    app.parse(argc, argv);
    code = run ? run() : 2;
  } catch (const CLI::ParseError& e) {
    code = app.exit(e) == 0 ? 0 : 2;  // usage errors exit 2 (docs/design.md, "Errors")
  } catch (const std::exception& e) {
    // Defence in depth: the library returns a Status for every input error and throws nothing, so
    // an exception here is a bug in sparkulator. Say so and exit 70 (kInternal), not abort (134).
    code = InternalError(e.what());
  } catch (...) {
    code = InternalError("an exception that is not a std::exception");
  }
  // The console script hands back to Python, which writes through its own buffers, not C's.
  std::fflush(stdout);
  std::fflush(stderr);
  return code;
}

}  // namespace spk::cli
