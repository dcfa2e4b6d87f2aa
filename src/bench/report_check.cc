// CheckResults (declared in bench/report.h): a results document read from a file has the shape the
// renderers and the model card read, checked field by field with base/json_at.h.
#include <initializer_list>

#include "base/json_at.h"
#include "bench/report.h"

namespace spk::bench {
namespace {

// The optional statistics: numbers, or null (or absent) where they could not be measured.
Status NumbersOrNull(const JsonAt& at, std::initializer_list<const char*> keys) {
  for (const char* key : keys) SPK_RETURN_IF_ERROR(at.Key(key).NumberOrNull().status());
  return Status::Ok();
}

// Absent, or a string.
Status OptionalString(const JsonAt& at) {
  return at.missing() ? Status::Ok() : at.String().status();
}

// Absent, or an array of strings (every element when `all`, else just the array).
Status OptionalStrings(const JsonAt& at, bool all) {
  if (at.missing()) return Status::Ok();
  SPK_ASSIGN_OR_RETURN(size_t n, at.Array());
  for (size_t i = 0; all && i < n; ++i) SPK_RETURN_IF_ERROR(at.Index(i).String().status());
  return Status::Ok();
}

// Absent, or an array of numbers or nulls (per-position rates and their interval bounds).
Status OptionalNumbers(const JsonAt& at) {
  if (at.missing()) return Status::Ok();
  SPK_ASSIGN_OR_RETURN(size_t n, at.Array());
  for (size_t i = 0; i < n; ++i) SPK_RETURN_IF_ERROR(at.Index(i).NumberOrNull().status());
  return Status::Ok();
}

// Absent, null, or an integer >= 0.
Status CountOrNull(const JsonAt& at) {
  return at.null_or_missing() ? Status::Ok() : at.Count().status();
}

// An array of `want` cell objects (any number when `want` is nullopt), each with its prompt length.
Result<size_t> Cells(const JsonAt& cells, std::optional<size_t> want) {
  SPK_ASSIGN_OR_RETURN(size_t n, cells.Array());
  if (want && n != *want) {
    return cells.Error("expected " + std::to_string(*want) + " cells (as arms[0] has), got " +
                       std::to_string(n));
  }
  for (size_t c = 0; c < n; ++c) {
    SPK_RETURN_IF_ERROR(cells.Index(c).Object());
    SPK_RETURN_IF_ERROR(cells.Index(c).Key("prompt_tokens").Count().status());
  }
  return n;
}

Status Arm(const JsonAt& arm, std::optional<size_t>* cells_per_arm) {
  SPK_RETURN_IF_ERROR(arm.Object());
  SPK_RETURN_IF_ERROR(arm.Key("name").String().status());
  SPK_ASSIGN_OR_RETURN(size_t cells, Cells(arm.Key("cells"), *cells_per_arm));
  *cells_per_arm = cells;
  for (size_t c = 0; c < cells; ++c) {
    const JsonAt cell = arm.Key("cells").Index(c);
    SPK_RETURN_IF_ERROR(cell.Key("n").Count().status());
    SPK_RETURN_IF_ERROR(cell.Key("failures").Count().status());
    SPK_RETURN_IF_ERROR(cell.Key("noisy").Bool().status());
    SPK_RETURN_IF_ERROR(NumbersOrNull(cell, {"mean_tok_s", "stdev_tok_s", "median_tok_s",
                                             "mad_tok_s", "relative_mad", "median_ttft_s"}));
  }
  const JsonAt spec = arm.Key("spec_decode");
  if (spec.null_or_missing()) return Status::Ok();
  SPK_RETURN_IF_ERROR(spec.Object());
  SPK_RETURN_IF_ERROR(NumbersOrNull(
      spec, {"drafts", "draft_tokens", "accepted_tokens", "acceptance_rate",
             "mean_acceptance_length", "acceptance_rate_ci_low", "acceptance_rate_ci_high",
             "mean_acceptance_length_ci_low", "mean_acceptance_length_ci_high"}));
  SPK_RETURN_IF_ERROR(CountOrNull(spec.Key("ci_blocks")));
  for (const char* key : {"per_position_rates", "per_position_ci_low", "per_position_ci_high"}) {
    SPK_RETURN_IF_ERROR(OptionalNumbers(spec.Key(key)));
  }
  return Status::Ok();
}

constexpr std::initializer_list<const char*> kEstimate = {
    "ratio",        "ci_low",           "ci_high",          "log_ratio",
    "log_ratio_se", "bootstrap_ci_low", "bootstrap_ci_high"};

Status Comparison(const JsonAt& cmp, std::optional<size_t> cells_per_arm) {
  SPK_RETURN_IF_ERROR(cmp.Object());
  SPK_RETURN_IF_ERROR(cmp.Key("arm").String().status());
  SPK_RETURN_IF_ERROR(cmp.Key("baseline").String().status());
  SPK_RETURN_IF_ERROR(NumbersOrNull(cmp, kEstimate));
  SPK_ASSIGN_OR_RETURN(size_t cells, Cells(cmp.Key("cells"), cells_per_arm));
  for (size_t c = 0; c < cells; ++c) {
    SPK_RETURN_IF_ERROR(NumbersOrNull(cmp.Key("cells").Index(c), kEstimate));
  }
  const JsonAt d = cmp.Key("decomposition");
  if (d.null_or_missing()) return Status::Ok();
  SPK_RETURN_IF_ERROR(d.Object());
  return NumbersOrNull(d, {"decode_time_ratio", "verify_steps_ratio", "time_per_step_ratio"});
}

}  // namespace

Status CheckResults(const nlohmann::json& results, const std::string& file) {
  const JsonAt doc(results, file);
  SPK_RETURN_IF_ERROR(doc.Object());
  SPK_ASSIGN_OR_RETURN(size_t arms, doc.Key("arms").Array());
  std::optional<size_t> cells_per_arm;  // every arm and comparison has arms[0]'s cells
  for (size_t a = 0; a < arms; ++a) {
    SPK_RETURN_IF_ERROR(Arm(doc.Key("arms").Index(a), &cells_per_arm));
  }
  SPK_ASSIGN_OR_RETURN(size_t comparisons, doc.Key("comparisons").Array());
  for (size_t c = 0; c < comparisons; ++c) {
    SPK_RETURN_IF_ERROR(Comparison(doc.Key("comparisons").Index(c), cells_per_arm));
  }
  const JsonAt prompts = doc.Key("prompts");  // any other kind is "no prompt description"
  if (!prompts.missing() && prompts.Object().ok()) {
    SPK_RETURN_IF_ERROR(OptionalString(prompts.Key("description")));
    SPK_RETURN_IF_ERROR(OptionalStrings(prompts.Key("degraded"), /*all=*/true));
    const JsonAt ignore_eos = prompts.Key("ignore_eos");  // a --prompts run's; the card reads it
    if (!ignore_eos.missing()) SPK_RETURN_IF_ERROR(ignore_eos.Bool().status());
  }
  const JsonAt host = doc.Key("host");
  if (host.missing()) return Status::Ok();
  SPK_RETURN_IF_ERROR(host.Object());
  SPK_RETURN_IF_ERROR(OptionalString(host.Key("hostname")));
  SPK_RETURN_IF_ERROR(OptionalString(host.Key("cpu")));
  return OptionalStrings(host.Key("gpus"), /*all=*/false);  // a GPU that is not a string is skipped
}

}  // namespace spk::bench
