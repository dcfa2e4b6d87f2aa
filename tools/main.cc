// Entry point of the `sparkulator` binary; the program itself is RunCli (tools/cli.cc).
#include "commands.h"

int main(int argc, char** argv) { return spk::cli::RunCli(argc, argv); }
