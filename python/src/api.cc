#include "api.h"

#include <fmt/format.h>

#include <utility>

#include "card_write.h"
#include "check/check.h"
#include "check_flags.h"
#include "commands.h"
#include "compare/compare.h"
#include "compare/report.h"
#include "dequantize/dequantize.h"
#include "example_flags.h"
#include "inspect/report.h"
#include "io/fs_util.h"
#include "plan/example.h"
#include "plan_flags.h"
#include "quantize/merge.h"
#include "quantize/quantize.h"
#include "vllm/family.h"

namespace spk::python {
namespace {

using Json = nlohmann::json;

// ---- the parameters, each declared once (quantize and inspect share the plan's) ----------------

constexpr ApiParam kSrc{"src", ParamType::kPath, "",
                        "the source: a folder, an ``org/name`` in the local Hugging Face cache, "
                        "or a snapshot."};
constexpr ApiParam kCkpt{"ckpt", ParamType::kPath, "",
                         "the checkpoint: a folder, an ``org/name`` in the local Hugging Face "
                         "cache, or a snapshot."};
constexpr ApiParam kThreads{"threads", ParamType::kOptionalInt, "None",
                            "worker threads; None for all cores. The output does not depend on "
                            "it."};
constexpr ApiParam kForce{"force", ParamType::kBool, "False", "replace ``dst`` if it exists."};
constexpr ApiParam kFsync{"fsync", ParamType::kBool, "True",
                          "wait for every file to reach the disk before the rename (the CLI's "
                          "default; False is ``--no-fsync``)."};

// ---- turning a request into the library call -------------------------------------------------

// The plan parameters are the CLI's plan options (tools/plan_flags.h): the same rows read the
// request into the CLI's PlanFlags, and the CLI's ApplyPlanFlags makes them options, so
// quantize/inspect read a plan the same way from either side. Raises nothing: a bad preset or
// scheme is the Status the CLI prints.
ApiParam Plan(std::string_view name) { return ParamOf(cli::PlanOptionRows(), name); }

Result<QuantizeOptions> PlanRequest(const ApiRequest& r, std::string source) {
  cli::PlanFlags flags;
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::PlanOptionRows(), &flags));
  QuantizeOptions o;
  o.source = std::move(source);
  SPK_RETURN_IF_ERROR(cli::ApplyPlanFlags(flags, &o));
  return o;
}

Durability DurabilityOf(const ApiRequest& r) {
  return r.Bool("fsync") ? Durability::kSynced : Durability::kPageCache;
}

Result<int> ThreadsOf(const ApiRequest& r) {
  return IntOf("threads", r.OptionalInt("threads").value_or(0));
}

Result<std::string> RunQuantize(const ApiRequest& r, RunContext run) {
  SPK_ASSIGN_OR_RETURN(QuantizeOptions o, PlanRequest(r, r.Str("src")));
  o.destination = r.Str("dst");
  SPK_ASSIGN_OR_RETURN(o.method, ParseQuantMethod(r.Str("method")));
  SPK_ASSIGN_OR_RETURN(run.threads, ThreadsOf(r));
  o.force = r.Bool("force");
  o.dry_run = r.Bool("dry_run");
  SPK_ASSIGN_OR_RETURN(o.target_precision, ParseTargetPrecision(r.Str("target_precision")));
  o.durability = DurabilityOf(r);
  o.resume = r.Bool("resume");
  if (auto part = r.OptionalStr("part")) {
    SPK_ASSIGN_OR_RETURN(o.part, ParsePart(*part));
  }
  SPK_ASSIGN_OR_RETURN(QuantizeSummary summary, QuantizeCheckpoint(run, o));
  return PlanReport(summary, /*with_tensors=*/true).dump();
}

Result<std::string> RunInspect(const ApiRequest& r, RunContext run) {
  SPK_ASSIGN_OR_RETURN(QuantizeOptions o, PlanRequest(r, r.Str("ckpt")));
  SPK_ASSIGN_OR_RETURN(auto report, InspectCheckpoint(run, o));
  return report.dump();
}

// check's parameters are the CLI's check options (tools/check_flags.h), read by the same rows.
ApiParam Check(std::string_view name) { return ParamOf(cli::CheckOptionRows(), name); }

Result<std::string> RunCheck(const ApiRequest& r, RunContext run) {
  CheckOptions o;
  o.checkpoint = r.Str("ckpt");
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::CheckOptionRows(), &o));
  SPK_ASSIGN_OR_RETURN(CheckReport report, CheckCheckpoint(run, o));
  return CheckReportToJson(report).dump();
}

Result<std::string> RunCompare(const ApiRequest& r, RunContext run) {
  CompareOptions o;
  o.source = r.Str("src");
  o.quantized = r.Str("q");
  if (auto samples = r.OptionalInt("samples")) {
    SPK_ASSIGN_OR_RETURN(o.samples, IntOf("samples", *samples));
  }
  if (auto seed = r.OptionalInt("seed")) {
    SPK_ASSIGN_OR_RETURN(o.seed, SeedOf("seed", *seed));
  }
  const std::string html = r.OptionalStr("html").value_or("");
  if (auto q2 = r.OptionalStr("q2")) {
    SPK_ASSIGN_OR_RETURN(GainReport report, CompareGain(run, o, *q2));
    if (!html.empty()) SPK_RETURN_IF_ERROR(WriteWholeFile(html, GainReportHtml(report)));
    return GainReportToJson(report).dump();
  }
  SPK_ASSIGN_OR_RETURN(CompareReport report, CompareCheckpoints(run, o));
  if (!html.empty()) SPK_RETURN_IF_ERROR(WriteWholeFile(html, CompareReportHtml(report)));
  return CompareReportToJson(report).dump();
}

Result<std::string> RunMerge(const ApiRequest& r, RunContext run) {
  MergeOptions o;
  o.destination = r.Str("dst");
  o.parts = r.StrList("parts");
  o.force = r.Bool("force");
  o.durability = DurabilityOf(r);
  SPK_ASSIGN_OR_RETURN(MergeSummary summary, MergeParts(run, o));
  return MergeSummaryToJson(summary).dump();
}

Result<std::string> RunDequantize(const ApiRequest& r, RunContext run) {
  DequantizeOptions o;
  o.source = r.Str("src");
  o.destination = r.Str("dst");
  o.force = r.Bool("force");
  SPK_ASSIGN_OR_RETURN(run.threads, ThreadsOf(r));
  o.durability = DurabilityOf(r);
  SPK_ASSIGN_OR_RETURN(DequantizeSummary summary, DequantizeCheckpoint(run, o));
  return DequantizeSummaryToJson(summary).dump();
}

// `example` prints a line, not JSON: the report is the folder and the family it wrote.
// example's parameters are the CLI's example options (tools/example_flags.h), read by the same
// rows. `example` prints a line, not JSON: the report is the folder and the family it wrote.
ApiParam Example(std::string_view name) { return ParamOf(cli::ExampleOptionRows(), name); }

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
  c.options.checkpoint = r.Str("ckpt");
  c.options.bench_files = r.StrList("bench");
  c.output = r.OptionalStr("output").value_or("");
  c.update = r.Bool("update");
  c.options.target = r.OptionalStr("target").value_or("");
  c.options.repo_id = r.OptionalStr("repo_id").value_or("");
  c.options.base_model = r.OptionalStr("base_model").value_or("");
  c.options.check = r.Bool("check");
  c.options.vllm_dir = r.OptionalStr("vllm").value_or("");
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
      .params =
          {kSrc,
           {"dst", ParamType::kPath, "",
            "the output folder; it must not exist (or be empty) unless ``force``. It is written "
            "into a temporary folder beside it and renamed at the end."},
           Plan("scheme"),
           Plan("group_size"),
           Plan("preset"),
           Plan("ignore"),
           {"method", ParamType::kStr, "\"rtn\"",
            "``rtn`` (min-max round-to-nearest, bit-exact with llm-compressor) or ``search``."},
           kThreads,
           kForce,
           {"dry_run", ParamType::kBool, "False", "plan and report only; write nothing."},
           {"progress", ParamType::kProgress, "True",
            "True draws a tqdm bar when tqdm is installed, False draws nothing, a callable "
            "``(what, done_bytes, total_bytes, finished)`` gets the counts instead."},
           {"target_precision", ParamType::kStr, "\"unquantized\"",
            "for drafts, the precision of the target they were trained against: unquantized (or "
            "bf16, f16, f32), a weight format (int4, int8, fp8, fp4) or a scheme name (w4a16, "
            "nvfp4, ...); recorded as its weight format."},
           Plan("tp"),
           Plan("target_layers"),
           kFsync,
           {"resume", ParamType::kBool, "False",
            "continue an interrupted run of the same job (``--resume``): the shards it finished "
            "and recorded, verified by their content hash, are taken over "
            "(``summary.reused_shards``), the rest written; the result is the same bytes."},
           {"part", ParamType::kOptionalStr, "None",
            "``\"I/N\"``: write part I of the job split into N (``--part``), for :func:`merge` "
            "(``summary.part_shards`` lists the shards this part wrote)."},
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
      .params = {kCkpt, Plan("scheme"), Plan("group_size"), Plan("preset"), Plan("ignore"),
                 Plan("tp"), Plan("target_layers"), Plan("target"), Plan("vllm_version"),
                 Plan("allow_unloadable")},
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
      .params = {kSrc,
                 {"q", ParamType::kPath, "", "the quantized checkpoint."},
                 {"q2", ParamType::kOptionalPath, "None",
                  "another quantization of ``src`` to compare with ``q``."},
                 {"samples", ParamType::kOptionalInt, "None",
                  "random inputs of the output error (the CLI's default when None)."},
                 {"seed", ParamType::kOptionalInt, "None",
                  "their seed (the CLI's default when None)."},
                 {"html", ParamType::kOptionalPath, "None",
                  "also write a self-contained HTML report with charts here (``--html``)."}},
      .returns = {{"GainReport", "q2"}, {"CompareReport", ""}},
      .returns_doc = "The report ``compare --json`` prints.",
      .raises_doc = kRaisesAsQuantize,
      .run = RunCompare});
  c.push_back(ApiCommand{
      .name = "dequantize",
      .doc = "A dense copy of the compressed-tensors checkpoint ``src`` at ``dst`` "
             "(``sparkulator dequantize SRC DST``), exactly as compressed-tensors decompresses "
             "it.",
      .params =
          {kSrc, {"dst", ParamType::kPath, "", "the output folder."}, kForce, kThreads, kFsync},
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
      .params = {{"dst", ParamType::kPath, "", "the output folder."},
                 {"parts", ParamType::kPathList, "", "the part folders, one per part."},
                 kForce,
                 kFsync},
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
      .params = {kCkpt,
                 {"bench", ParamType::kPathList, "()",
                  "results of ``sparkulator bench --json``, one file per machine."},
                 {"output", ParamType::kOptionalPath, "None",
                  "write the card here (``-o``), each machine's chart as bench-N.svg beside it; "
                  "None writes nothing (the card is in ``markdown``)."},
                 {"update", ParamType::kBool, "False",
                  "update the existing ``output``: keep its prose and foreign front-matter keys, "
                  "replace the generated part."},
                 {"target", ParamType::kOptionalStr, "None",
                  "the target model for the vllm serve line (a Hub id or a path)."},
                 {"repo_id", ParamType::kOptionalStr, "None",
                  "the Hub id this checkpoint will be published as (used in the serve line)."},
                 {"base_model", ParamType::kOptionalStr, "None",
                  "the Hub id of the source (None: derived from the source quantize recorded)."},
                 {"check", ParamType::kBool, "False",
                  "run :func:`check` and list its findings in the card (``check_errors`` counts "
                  "its errors, where the CLI exits 1)."},
                 {"vllm", ParamType::kOptionalPath, "None",
                  "an installed vLLM (site-packages) or source tree: the patches ``check --vllm`` "
                  "reports go into the card."}},
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
