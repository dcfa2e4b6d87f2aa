// The options of `check` (and of the Python check(), python/src/api.cc): one row each
// (tools/option_table.h) gives the CLI flag and the Python parameter, setting a CheckOptions field.
// CKPT, which the CLI may leave out (check --vllm DIR alone), and --json are not rows.
#pragma once

#include <span>

#include "check/check.h"
#include "option_table.h"

namespace spk::cli {

std::span<const OptionRow<CheckOptions>> CheckOptionRows();

}  // namespace spk::cli
