// What `inspect` and `quantize --json` tell a user: the tensors, the detected family, the plan with
// its reasons, the sizes before and after, and the `vllm serve` line that fits the checkpoint
// (vllm/serve_line.h).
//
// Builds plain JSON values (for --json) and renders them as text; no I/O beyond what the callers
// pass. Thread-safe (pure functions). Errors: InspectCheckpoint returns the errors of opening the
// source.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "io/file.h"
#include "io/run_context.h"
#include "quantize/quantize.h"

namespace spk {

// The report of a quantize run or a dry run (inspect of an unquantized checkpoint).
nlohmann::ordered_json PlanReport(const QuantizeSummary& summary, bool with_tensors);

// Inspect: for an unquantized checkpoint, what `quantize` with these options would do; for a
// compressed-tensors checkpoint of any format, its scheme and its quantized modules (shape, bytes
// stored, bytes of the dense weight `dequantize` would write); its size is dense -> stored.
Result<nlohmann::ordered_json> InspectCheckpoint(const RunContext& run,
                                                 const QuantizeOptions& options);

// Human-readable rendering of either report.
std::string RenderReport(const nlohmann::ordered_json& report, bool with_tensors);

}  // namespace spk
