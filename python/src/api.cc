#include "api.h"

#include <fmt/format.h>

#include <utility>

#include "card_write.h"
#include "check/check.h"
#include "check_flags.h"
#include "command_flags.h"
#include "commands.h"
#include "compare/compare.h"
#include "compare/report.h"
#include "dequantize/dequantize.h"
#include "example_flags.h"
#include "inspect/report.h"
#include "io/fs_util.h"
#include "plan/example.h"
#include "quantize/merge.h"
#include "quantize/quantize.h"
#include "vllm/family.h"

namespace spk::python {
namespace {

using Json = nlohmann::json;

// ---- the parameters: each an option row of the CLI's (tools/option_table.h) -------------------

// check's CKPT, which its CLI may leave out (check --vllm DIR alone), is no row.
constexpr ApiParam kCkpt{"ckpt", ParamType::kPath, "",
                         "the checkpoint: a folder, an ``org/name`` in the local Hugging Face "
                         "cache, or a snapshot."};

// A parameter of a function is the row of that name in the CLI's tables of its subcommand: the
// plan's (quantize, inspect), the write options' (quantize, dequantize) and the subcommand's own.
ApiParam Plan(std::string_view name) { return ParamOf(cli::PlanOptionRows(), name); }
ApiParam Write(std::string_view name) { return ParamOf(cli::WriteOptionRows(), name); }
ApiParam Quantize(std::string_view name) { return ParamOf(cli::QuantizeOptionRows(), name); }
ApiParam Inspect(std::string_view name) { return ParamOf(cli::InspectOptionRows(), name); }
ApiParam Check(std::string_view name) { return ParamOf(cli::CheckOptionRows(), name); }
ApiParam Compare(std::string_view name) { return ParamOf(cli::CompareOptionRows(), name); }
ApiParam Dequantize(std::string_view name) { return ParamOf(cli::DequantizeOptionRows(), name); }
ApiParam Merge(std::string_view name) { return ParamOf(cli::MergeOptionRows(), name); }
ApiParam Example(std::string_view name) { return ParamOf(cli::ExampleOptionRows(), name); }
ApiParam Card(std::string_view name) { return ParamOf(cli::CardOptionRows(), name); }

// ---- turning a request into the library call -------------------------------------------------

// The same rows read the request into the CLI's flags structs, and the CLI's Apply functions make
// them the library's options, so each function reads its options as its subcommand does: a bad
// preset, scheme or method is the Status the CLI prints.
Result<std::string> RunQuantize(const ApiRequest& r, RunContext run) {
  cli::QuantizeFlags flags;
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::QuantizeOptionRows(), &flags));
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::PlanOptionRows(), &flags));
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::WriteOptionRows(), &flags));
  QuantizeOptions o;
  SPK_RETURN_IF_ERROR(cli::ApplyQuantizeFlags(flags, &o));
  run.threads = flags.threads;
  SPK_ASSIGN_OR_RETURN(QuantizeSummary summary, QuantizeCheckpoint(run, o));
  return PlanReport(summary, /*with_tensors=*/true).dump();
}

Result<std::string> RunInspect(const ApiRequest& r, RunContext run) {
  cli::InspectFlags flags;
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::InspectOptionRows(), &flags));
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::PlanOptionRows(), &flags));
  QuantizeOptions o;
  o.source = flags.checkpoint;
  SPK_RETURN_IF_ERROR(cli::ApplyPlanFlags(flags, &o));
  SPK_ASSIGN_OR_RETURN(auto report, InspectCheckpoint(run, o));
  return report.dump();
}

Result<std::string> RunCheck(const ApiRequest& r, RunContext run) {
  CheckOptions o;
  o.checkpoint = r.Str("ckpt");
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::CheckOptionRows(), &o));
  SPK_ASSIGN_OR_RETURN(CheckReport report, CheckCheckpoint(run, o));
  return CheckReportToJson(report).dump();
}

Result<std::string> RunCompare(const ApiRequest& r, RunContext run) {
  cli::CompareFlags flags;
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::CompareOptionRows(), &flags));
  if (!flags.quantized2.empty()) {
    SPK_ASSIGN_OR_RETURN(GainReport report, CompareGain(run, flags, flags.quantized2));
    if (!flags.html.empty())
      SPK_RETURN_IF_ERROR(WriteWholeFile(flags.html, GainReportHtml(report)));
    return GainReportToJson(report).dump();
  }
  SPK_ASSIGN_OR_RETURN(CompareReport report, CompareCheckpoints(run, flags));
  if (!flags.html.empty()) {
    SPK_RETURN_IF_ERROR(WriteWholeFile(flags.html, CompareReportHtml(report)));
  }
  return CompareReportToJson(report).dump();
}

Result<std::string> RunMerge(const ApiRequest& r, RunContext run) {
  cli::MergeFlags flags;
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::MergeOptionRows(), &flags));
  MergeOptions o = flags;
  o.durability = flags.fsync ? Durability::kSynced : Durability::kPageCache;
  SPK_ASSIGN_OR_RETURN(MergeSummary summary, MergeParts(run, o));
  return MergeSummaryToJson(summary).dump();
}

Result<std::string> RunDequantize(const ApiRequest& r, RunContext run) {
  cli::DequantizeFlags flags;
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::DequantizeOptionRows(), &flags));
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::WriteOptionRows(), &flags));
  DequantizeOptions o = flags;
  o.durability = flags.WriteDurability();
  run.threads = flags.threads;
  SPK_ASSIGN_OR_RETURN(DequantizeSummary summary, DequantizeCheckpoint(run, o));
  return DequantizeSummaryToJson(summary).dump();
}

// `example` prints a line, not JSON: the report is the folder and the family it wrote.
Result<std::string> RunExample(const ApiRequest& r, RunContext run) {
  ExampleOptions o;
  o.dir = r.Str("dir");
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::ExampleOptionRows(), &o));
  SPK_RETURN_IF_ERROR(WriteExampleCheckpoint(o, run.fs));
  return nlohmann::ordered_json{{"dir", o.dir}, {"family", o.family}}.dump();
}

// `card` prints the card (or writes it with -o): the report is the card and what was written.
Result<std::string> RunCard(const ApiRequest& r, RunContext run) {
  cli::CardRequest c;
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::CardOptionRows(), &c));
  SPK_ASSIGN_OR_RETURN(cli::WrittenCard written, cli::WriteCard(run.fs, std::move(c)));
  return nlohmann::ordered_json{{"markdown", written.card.markdown},
                                {"check_errors", written.card.check_errors},
                                {"files", written.files}}
      .dump();
}

constexpr std::string_view kRaisesAsQuantize =
    "ValueError, FileNotFoundError, OSError: as :func:`quantize`.";

std::vector<ApiCommand> MakeCommands() {
  std::vector<ApiCommand> c;
  c.push_back(ApiCommand{
      .name = "quantize",
      .doc = "Quantizes the checkpoint ``src`` into a compressed-tensors checkpoint at ``dst`` "
             "(``sparkulator quantize SRC DST``).",
      .params = {Quantize("src"),
                 Quantize("dst"),
                 Plan("scheme"),
                 Plan("group_size"),
                 Plan("preset"),
                 Plan("ignore"),
                 Quantize("method"),
                 Write("threads"),
                 Quantize("force"),
                 Quantize("dry_run"),
                 {"progress", ParamType::kProgress, "True",
                  "True draws a tqdm bar when tqdm is installed, False draws nothing, a callable "
                  "``(what, done_bytes, total_bytes, finished)`` gets the counts instead."},
                 Quantize("target_precision"),
                 Plan("tp"),
                 Plan("target_layers"),
                 Write("fsync"),
                 Quantize("resume"),
                 Quantize("part"),
                 Plan("target"),
                 Plan("vllm_version"),
                 Plan("allow_unloadable")},
      .returns = {{"QuantizeSummary", ""}},
      .returns_doc = "The summary ``quantize --json`` prints.",
      .raises_doc = "ValueError: bad arguments or a malformed source. FileNotFoundError: ``src`` "
                    "not found. FileExistsError: ``dst`` exists. OSError: the file system "
                    "failed. KeyboardInterrupt: Ctrl-C (nothing is left behind).",
      .run = RunQuantize});
  c.push_back(ApiCommand{
      .name = "inspect",
      .doc = "What is in ``ckpt`` (``sparkulator inspect CKPT``); writes nothing.\n\nFor a dense "
             "checkpoint: the plan ``quantize`` would follow with these arguments, as a "
             "QuantizeSummary of a dry run. For a compressed-tensors checkpoint: its scheme and "
             "quantized modules, as a QuantizedCheckpoint.",
      .params = {Inspect("ckpt"), Plan("scheme"), Plan("group_size"), Plan("preset"),
                 Plan("ignore"), Plan("tp"), Plan("target_layers"), Plan("target"),
                 Plan("vllm_version"), Plan("allow_unloadable")},
      .returns = {{"QuantizedCheckpoint", "quantized"}, {"QuantizeSummary", ""}},
      .returns_doc = "The report ``inspect --json`` prints.",
      .raises_doc = kRaisesAsQuantize,
      .run = RunInspect});
  c.push_back(ApiCommand{
      .name = "check",
      .doc = "Will vLLM load ``ckpt``, and load it right? (``sparkulator check CKPT``)\n\n"
             "Findings are returned, never raised: ``report.ok`` is False when one is an error "
             "(where the CLI exits 1), and ``report.findings`` lists them with what to do about "
             "each.",
      .params = {kCkpt, Check("target"), Check("tp"), Check("vllm_version"), Check("vllm"),
                 Check("target_layers"), Check("vllm_batch_invariant"), Check("vllm_module_map"),
                 Check("vllm_python"), Check("vllm_map_build"), Check("vllm_map_out")},
      .returns = {{"CheckReport", ""}},
      .returns_doc = "The report ``check --json`` prints.",
      .raises_doc = "ValueError: bad arguments or an unreadable checkpoint. FileNotFoundError: "
                    "``ckpt`` or ``target`` not found. OSError: the file system failed.",
      .run = RunCheck});
  c.push_back(ApiCommand{
      .name = "compare",
      .doc = "Per-layer error of the quantized checkpoint ``q`` against its source ``src`` "
             "(``sparkulator compare SRC Q [Q2]``).\n\nWith ``q2`` (another quantization of "
             "``src``, e.g. ``method=\"search\"``): both errors and the gain Q2/Q per layer, as "
             "a GainReport.",
      .params = {Compare("src"), Compare("q"), Compare("q2"), Compare("samples"), Compare("seed"),
                 Compare("html")},
      .returns = {{"GainReport", "q2"}, {"CompareReport", ""}},
      .returns_doc = "The report ``compare --json`` prints.",
      .raises_doc = kRaisesAsQuantize,
      .run = RunCompare});
  c.push_back(ApiCommand{
      .name = "dequantize",
      .doc = "A dense copy of the compressed-tensors checkpoint ``src`` at ``dst`` "
             "(``sparkulator dequantize SRC DST``), exactly as compressed-tensors decompresses "
             "it.",
      .params = {Dequantize("src"), Dequantize("dst"), Dequantize("force"), Write("threads"),
                 Write("fsync")},
      .returns = {{"DequantizeSummary", ""}},
      .returns_doc = "The summary ``dequantize --json`` prints.",
      .raises_doc = "ValueError, FileNotFoundError, FileExistsError, OSError, KeyboardInterrupt: "
                    "as :func:`quantize`.",
      .run = RunDequantize});
  c.push_back(ApiCommand{
      .name = "merge",
      .doc = "The parts of a job split across machines (``quantize(..., part=\"I/N\")`` for I "
             "= 1..N) made into one checkpoint at ``dst``, byte for byte the single-machine "
             "output (``sparkulator merge DST PART...``; docs/distributed.md).",
      .params = {Merge("dst"), Merge("parts"), Merge("force"), Merge("fsync")},
      .returns = {{"MergeSummary", ""}},
      .returns_doc = "The summary ``merge --json`` prints.",
      .raises_doc = "ValueError: the parts are not one job's parts 1..N, or a shard changed "
                    "since its part wrote it (the message names the part and the file). "
                    "FileNotFoundError: a part folder or its record is missing. FileExistsError: "
                    "``dst`` exists. OSError: the file system failed.",
      .run = RunMerge});
  c.push_back(ApiCommand{
      .name = "example",
      .doc = "Writes a small checkpoint shaped like a DFlash draft, an EAGLE-3 head or a "
             "Qwen3-style LLM at ``dir`` (random weights with realistic scale and outlier "
             "columns), to try the other functions on (``sparkulator example DIR``).",
      .params = {{"dir", ParamType::kPath, "",
                  "the output folder; it must not exist unless "
                  "``force``."},
                 Example("family"),
                 Example("shards"),
                 Example("hidden"),
                 Example("intermediate"),
                 Example("layers"),
                 Example("kv_heads"),
                 Example("fc_inputs"),
                 Example("target_layers"),
                 Example("vocab"),
                 Example("dtype"),
                 Example("seed"),
                 Example("force")},
      .returns = {{"ExampleCheckpoint", ""}},
      .returns_doc = "The folder written and its family.",
      .raises_doc = "ValueError: bad arguments. FileExistsError: ``dir`` exists. OSError: the "
                    "file system failed.",
      .run = RunExample});
  c.push_back(ApiCommand{
      .name = "card",
      .doc = "The Hugging Face model card (README.md) of a checkpoint written by :func:`quantize` "
             "(``sparkulator card CKPT``): front matter, pairing, sizes, recipe, modules kept "
             "dense, the vllm serve line, and with ``bench`` the benchmark tables and memory per "
             "arm. No network.",
      .params = {Card("ckpt"), Card("bench"), Card("output"), Card("update"), Card("target"),
                 Card("repo_id"), Card("base_model"), Card("check"), Card("vllm")},
      .returns = {{"ModelCard", ""}},
      .returns_doc = "The card's Markdown, the check's error count and the files written.",
      .raises_doc = "ValueError: a bad results file or checkpoint. FileNotFoundError: ``ckpt`` or "
                    "a file not found. FileExistsError: ``output`` exists without ``update``. "
                    "OSError: the file system failed.",
      .run = RunCard});
  for (ApiCommand& bench : BenchApiCommands()) c.push_back(std::move(bench));
  return c;
}

}  // namespace

const std::vector<ApiCommand>& ApiCommands() {
  static const std::vector<ApiCommand> commands = MakeCommands();
  return commands;
}

const ApiCommand* FindApiCommand(std::string_view name) {
  for (const ApiCommand& c : ApiCommands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace spk::python
