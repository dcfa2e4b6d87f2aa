// The options of `example` (and of the Python example(), python/src/api.cc): one row each
// (tools/option_table.h) gives the CLI flag and the Python parameter, setting an ExampleOptions
// field. DIR is not a row (a positional of the CLI, the first parameter in Python).
#pragma once

#include <span>

#include "option_table.h"
#include "plan/example.h"

namespace spk::cli {

std::span<const OptionRow<ExampleOptions>> ExampleOptionRows();

}  // namespace spk::cli
