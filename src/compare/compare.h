// `sparkulator compare SRC QUANTIZED`: how far a quantized checkpoint is from its source, layer by
// layer, and what that does to each layer's output.
//
// For every quantized module of QUANTIZED (model/quantized_modules.h; any format of the
// scheme registry), its source weight W (SRC's <module>.weight) and the dequantized weight W'
// (source/module_reader.h, exactly compressed-tensors' decompress) are streamed in row blocks
// (memory bounded by the block size) to give: relative Frobenius error ||W-W'||/||W||, SNR in dB,
// cosine similarity, max absolute error, the fraction of weights the quantizer clipped (w/s + zp
// beyond the integer range, or the largest FP8/FP4 value, by more than half a step), and the
// relative error of Y = X W^T on `samples` random N(0,1) inputs X drawn from a fixed seed
// (splitmix64 + Box-Muller, so the numbers are the same on every platform). Layers come worst
// first. compare/report.h renders the reports.
//
// With a second quantized checkpoint Q2 of the same source (e.g. `--method rtn` and `--method
// search`), CompareGain runs CompareCheckpoints on each and joins the two reports by module: every
// layer gets both errors and the gain, the ratio of squared errors Q2/Q (weight SSE and output
// error squared; below 1 means Q2 is closer to the source), and the totals give the weight SSE of
// each over all quantized tensors and their ratio. Layers come largest gain (smallest SSE ratio)
// first. Q and Q2 must quantize the same set of modules (otherwise InvalidInput naming a module
// missing from one side: a total over different sets would not be a like-for-like ratio); their
// schemes and group sizes may differ, since both are measured against the same source weights, and
// "what does w8 or group 32 buy per layer" is a fair question. Both scheme labels are reported.
//
// Thread safety: call from one thread. Errors: the errors of opening either checkpoint; a module
// whose source weight is missing or shaped differently is InvalidInput naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/file.h"
#include "io/run_context.h"

namespace spk {

struct CompareOptions {
  std::string source;     // the dense checkpoint quantize read
  std::string quantized;  // the compressed-tensors checkpoint quantize wrote
  int samples = 8;        // rows of X for the output error
  uint64_t seed = 1;
};

struct LayerError {
  std::string module;  // checkpoint module name
  std::string kind;    // its last name part: q_proj, down_proj, fc, ...
  int64_t out = 0, in = 0;
  double rel_fro = 0;  // ||W - W'||_F / ||W||_F
  double snr_db = 0;   // 10 log10(||W||^2 / ||W - W'||^2); +inf when exact
  double cosine = 0;
  double max_abs = 0;
  double clipped_fraction = 0;
  double output_rel_error = 0;  // ||X W^T - X W'^T||_F / ||X W^T||_F
  double sse = 0;               // ||W - W'||_F^2 (not in the one-checkpoint JSON)
};

struct KindSummary {
  std::string kind;
  size_t layers = 0;
  double mean_rel_fro = 0, mean_snr_db = 0, mean_output_rel_error = 0;
};

struct CompareReport {
  std::string source, quantized, scheme;
  std::vector<LayerError> layers;  // worst (largest rel_fro) first
  std::vector<KindSummary> kinds;  // worst mean first
  double overall_rel_fro = 0;      // over all quantized weights together
  double mean_snr_db = 0, min_cosine = 1, mean_output_rel_error = 0;
  size_t dense_tensors = 0;  // tensors stored dense in QUANTIZED (not compared)
  double total_sse = 0;      // sum of every layer's sse (not in the one-checkpoint JSON)
};

Result<CompareReport> CompareCheckpoints(const RunContext& run, const CompareOptions& options);

// One module of two quantized outputs Q and Q2 of the same source.
struct LayerGain {
  LayerError q, q2;
  double sse_ratio = 1;        // q2.sse / q.sse; +inf when only Q is exact, 1 when both are
  double output_se_ratio = 1;  // (q2.output_rel_error / q.output_rel_error)^2, the same way
};

struct KindGain {
  std::string kind;
  size_t layers = 0;
  double sse = 0, sse2 = 0, sse_ratio = 1;
};

struct GainReport {
  CompareReport q, q2;            // as CompareCheckpoints returned them
  std::vector<LayerGain> layers;  // largest gain (smallest sse_ratio) first, then by module
  std::vector<KindGain> kinds;    // largest gain first
  double sse_ratio = 1;           // q2.total_sse / q.total_sse: "weight SSE Q2 / Q"
  size_t layers_better = 0, layers_worse = 0;  // sse_ratio < 1, > 1
};

// Compares `options.quantized` (Q) and `quantized2` (Q2) each against `options.source`.
Result<GainReport> CompareGain(const RunContext& run, const CompareOptions& options,
                               const std::string& quantized2);
// The join itself (consumes both reports); InvalidInput when the module sets differ.
Result<GainReport> JoinCompareReports(CompareReport q, CompareReport q2);

}  // namespace spk
