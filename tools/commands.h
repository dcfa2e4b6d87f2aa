// The subcommands of the `sparkulator` binary. Each lives in its own tools/<name>_cmd.cc and is
// thin: it declares its flags with CLI11 (help text comes from those declarations) and calls the
// library.
//
// Add<Name>Command registers a subcommand on `app`; when the user picks it, CLI11 calls the
// callback that stores the command's body in *run, and main() runs it once parsing succeeded. A
// body returns the process exit code (0 ok, 1 findings, 2 usage or input error, 3 I/O error).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "base/status.h"

namespace spk::cli {

using CommandBody = std::function<int()>;

// The whole command line: parses argv (argv[0] is the program name), runs the subcommand and
// returns the exit code. The binary's main() and the Python console script both call it.
int RunCli(int argc, char** argv);

void AddVersionCommand(CLI::App& app, CommandBody* run);
void AddExampleCommand(CLI::App& app, CommandBody* run);
void AddQuantizeCommand(CLI::App& app, CommandBody* run);
void AddInspectCommand(CLI::App& app, CommandBody* run);
void AddBenchCommand(CLI::App& app, CommandBody* run);
void AddCheckCommand(CLI::App& app, CommandBody* run);
void AddCompareCommand(CLI::App& app, CommandBody* run);
void AddDequantizeCommand(CLI::App& app, CommandBody* run);
void AddMergeCommand(CLI::App& app, CommandBody* run);
void AddCardCommand(CLI::App& app, CommandBody* run);

// Prints "sparkulator: error: <message>" to stderr and returns the exit code for the status.
int ReportError(const Status& status);

}  // namespace spk::cli
