// `sparkulator card`: the Hugging Face model card (README.md) of a quantized checkpoint, from what
// sparkulator knows of it, with no network.
//
// Sources, each named in the card: the checkpoint's config.json (quantization_config and the
// "sparkulator" record quantize wrote: source, scheme, group, method, target precision, sizes,
// modules kept dense with their reasons; quantize/record.h), the scheme's row of the scheme table
// (quant/scheme.h: what the weights are, the compressed-tensors format, the kernels vLLM runs it
// on, the number-type tag), `check` (the family, the `vllm serve` line, and with a vLLM tree the
// patches vLLM needs; check/check.h), the source's own README front matter or config.json
// (license), and `bench --json` results (tables per machine, pooled across machines, memory per
// arm; bench/report.h). The generated part sits between two HTML comments (kGeneratedBegin /
// kGeneratedEnd); updating a card replaces only that part and the front-matter keys the card owns,
// and keeps everything else the author wrote.
//
// Every file (the checkpoint's, the source's, results files, a vLLM tree) is read through the
// FileSystem MakeCard is handed. Layer: above check and bench (docs/design.md). Ownership: values.
// Thread safety: one call at a time per output. Error policy: no exceptions; Status (NotFound /
// InvalidInput naming the file, e.g. a record whose scheme has no row, or the file and the field of
// the record or of a results file, read through base/json_at.h, e.g. "CKPT/config.json:
// sparkulator.group_size: expected a number, got a string", "B.json: arms[1].name: expected a
// string, got a number"; Usage) for what the card cannot be written from; a missing optional
// source is said in the card.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "base/status.h"
#include "io/file.h"
#include "io/run_context.h"

namespace spk::card {

inline constexpr const char* kGeneratedBegin =
    "<!-- sparkulator card: generated begin (edits between these markers are replaced) -->";
inline constexpr const char* kGeneratedEnd = "<!-- sparkulator card: generated end -->";

struct CardOptions {
  std::string checkpoint;                // the quantized checkpoint folder
  std::vector<std::string> bench_files;  // `bench --json` results, one per machine
  std::string target;                    // the target's name in the serve line ("<target>")
  std::string repo_id;                   // the draft's Hub id for the serve line (else its path)
  std::string base_model;                // overrides the base model derived from the source
  bool check = false;                    // include `check`'s findings (and patches with vllm_dir)
  std::string vllm_dir;                  // an installed vLLM (site-packages) or source tree
  std::vector<std::string> chart_files;  // per bench file: an SVG to reference, or empty
};

struct Card {
  std::string markdown;                 // the whole README.md
  std::vector<std::string> chart_svgs;  // parallel to CardOptions::chart_files
  size_t check_errors = 0;              // error findings of `check` (with --check)
};

// The card. `existing` is the current README.md (empty for a new one): its prose and front-matter
// keys outside the card's are kept.
Result<Card> MakeCard(const RunContext& run, const CardOptions& options,
                      const std::string& existing);

// The generated block's Markdown for a list of results documents (tables per machine, pooled
// tables when there are several, memory per arm). `names` label them; `charts` are image paths.
// REQUIRES: each document passed bench::CheckResults (MakeCard checks every --bench file).
std::string BenchSections(const std::vector<nlohmann::json>& results,
                          const std::vector<std::string>& names,
                          const std::vector<std::string>& charts);

}  // namespace spk::card
