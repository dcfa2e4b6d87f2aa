// Turning measured requests into figures and documents: per-cell statistics, acceptance, paired
// ratios with confidence intervals, the verify-step decomposition (analysis JSON), the card-style
// Markdown tables, an SVG plot, and `bench report` pooling across machines.
//
// Everything after Analyze works on the JSON document, so a saved results file renders exactly like
// a live run. A document read from a file is checked first (CheckResults): the renderers read only
// what it checks. Ownership: values. Thread safety: pure functions. Error policy: no exceptions;
// malformed input files give InvalidInput naming the file and the field (base/json_at.h).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "base/status.h"
#include "bench/request.h"

namespace spk::bench {

struct AnalysisOptions {
  std::vector<std::string> arm_names;  // in --arm order; the first is the baseline
  std::vector<size_t> prompt_lengths;
  double noisy_relative_mad = 0.05;
};

// {"arms": [...], "comparisons": [...]} from the requests (warm-up requests excluded).
nlohmann::json Analyze(const std::vector<RequestRecord>& records, const AnalysisOptions& options);

// A cell's name in tables and plots: its prompt length, or "prompts file" for the one cell of a
// run with --prompts (prompt_tokens 0).
std::string CellLabel(const nlohmann::json& prompt_tokens);

// OK when `results` (read from `file`) has the shape everything below and the model card read:
//  - "arms", each with a string "name"; "cells" (as many as arms[0]'s), each an object with an
//    integer >= 0 "prompt_tokens" (0: the one cell of a `bench --prompts` run), "n" and "failures",
//    a boolean "noisy" and its statistics numbers or null; "spec_decode" null (or absent) or an
//    object whose counts, rates and mean acceptance length and their 95% bounds
//    ("acceptance_rate_ci_low", "mean_acceptance_length_ci_high", ...) are numbers or null,
//    "ci_blocks" an integer >= 0 or null, and "per_position_rates", "per_position_ci_low" and
//    "per_position_ci_high" absent or arrays of numbers or null;
//  - "comparisons", each with string "arm" and "baseline", its estimates numbers or null, cells
//  like
//    arms[0]'s, and "decomposition" null or an object of numbers or null;
//  - optional "prompts" (when an object: "description" a string, "degraded" strings, "ignore_eos" a
//    boolean) and "host" (strings).
// Fields no renderer reads ("flags", "requests", "ci_method", "prompts"."file", ...) are not
// checked. Else InvalidInput naming the file and the field: "B.json: arms[1].name: expected a
// string, got a number". Analyze's output always passes.
Status CheckResults(const nlohmann::json& results, const std::string& file);

// The card-style tables of a results document: all of them, or one section (the model card
// composes its own page from these). REQUIRES: CheckResults(results) is OK.
std::string RenderMarkdown(const nlohmann::json& results);
std::string RenderDecodeTable(const nlohmann::json& results);  // tok/s per prompt, delta + CI
std::string RenderSpecTable(const nlohmann::json& results);    // drafted, accepted, acceptance
std::string RenderMemoryTable(const nlohmann::json& results);  // bench/memory.h, per arm

// Two panels (report_svg.cc; REQUIRES as above): mean decode tok/s by prompt length per arm with
// +-1 sample stdev error bars, and each arm's change against the baseline (ratio - 1, in %) with
// its 95% CI on a scale fitted to the data around the 0% line.
std::string RenderSvg(const nlohmann::json& results);
// The second panel alone: each arm's decode tok/s ratio to the baseline, per prompt length and
// overall, as its change from 1 with its 95% CI (plot::DeviationChart). Empty with one arm.
std::string RenderDeltaSvg(const nlohmann::json& results);

// Pools the comparisons of several results files (one per machine) by inverse-variance weighting of
// per-machine log ratios. `names` label the machines (file names). Reads only the comparisons (each
// with string "arm" and "baseline", cells with integer "prompt_tokens"), checked with JsonAt.
Result<nlohmann::json> PoolResults(const std::vector<nlohmann::json>& results,
                                   const std::vector<std::string>& names);
std::string RenderPooledMarkdown(const nlohmann::json& pooled);

}  // namespace spk::bench
