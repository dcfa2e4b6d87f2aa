// The options of quantize, inspect, compare, dequantize and merge, as option rows
// (tools/option_table.h): each row gives the CLI flag or positional and the Python parameter of
// the same name, so tools/*_cmd.cc add their CLI11 options and python/src/api.cc declares and
// reads its functions' parameters from the one table. The flags structs are what the rows set; the
// Apply functions make them the library's options, the same for the CLI and Python.
//
// Not rows: what only the CLI has (--json, compare's --top, quantize's old --shard) and quantize's
// Python-only progress.
//
// Errors: ApplyQuantizeFlags returns Usage for a method, target precision or part that does not
// parse (and what ApplyPlanFlags refuses); nothing else fails.
#pragma once

#include <span>
#include <string>

#include "compare/compare.h"
#include "dequantize/dequantize.h"
#include "option_table.h"
#include "plan_flags.h"
#include "quantize/merge.h"
#include "quantize/quantize.h"

namespace spk::cli {

// --threads and --no-fsync, of every command that writes a checkpoint through CheckpointWriter
// (quantize, dequantize), declared once so that their help reads the same everywhere.
struct WriteFlags {
  int threads = 0;    // 0: all cores
  bool fsync = true;  // false: --no-fsync
  Durability WriteDurability() const {
    return fsync ? Durability::kSynced : Durability::kPageCache;
  }
};
std::span<const OptionRow<WriteFlags>> WriteOptionRows();

// quantize's own options; the plan's (PlanFlags) and the write options' rows come beside them.
struct QuantizeFlags : PlanFlags, WriteFlags {
  std::string source, destination;
  std::string method = "rtn";
  std::string target_precision = "unquantized";
  bool force = false, dry_run = false, resume = false;
  std::string part;  // "I/N"; "": the whole job
};
std::span<const OptionRow<QuantizeFlags>> QuantizeOptionRows();
Status ApplyQuantizeFlags(const QuantizeFlags& flags, QuantizeOptions* options);

// inspect's CKPT; its options are the plan's.
struct InspectFlags : PlanFlags {
  std::string checkpoint;
};
std::span<const OptionRow<InspectFlags>> InspectOptionRows();

struct CompareFlags : CompareOptions {
  std::string quantized2;  // "": compare Q alone
  std::string html;        // "": no HTML report
};
std::span<const OptionRow<CompareFlags>> CompareOptionRows();

struct DequantizeFlags : DequantizeOptions, WriteFlags {};
std::span<const OptionRow<DequantizeFlags>> DequantizeOptionRows();

// merge's --no-fsync has its own row: merge has no --threads, and its help says the rename stays
// atomic.
struct MergeFlags : MergeOptions {
  bool fsync = true;
};
std::span<const OptionRow<MergeFlags>> MergeOptionRows();

}  // namespace spk::cli
