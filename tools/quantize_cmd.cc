// `sparkulator quantize SRC DST`: writes a compressed-tensors checkpoint (see
// src/quantize/quantize.h).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>

#include "command_flags.h"
#include "commands.h"
#include "inspect/report.h"

namespace spk::cli {
namespace {

std::atomic<bool> g_interrupted{false};  // set by SIGINT/SIGTERM; the run stops and cleans up

void OnSignal(int) { g_interrupted = true; }

int RunQuantize(const QuantizeFlags& flags, bool json) {
  QuantizeOptions options;
  Status applied = ApplyQuantizeFlags(flags, &options);
  if (!applied.ok()) return ReportError(applied);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  Progress progress = Progress::ForStderr();
  const RunContext run{.progress = &progress, .cancel = &g_interrupted, .threads = flags.threads};
  auto summary = QuantizeCheckpoint(run, options);
  if (!summary.ok()) return ReportError(summary.status());
  auto report = PlanReport(*summary, /*with_tensors=*/json);
  if (json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::fputs(RenderReport(report, false).c_str(), stdout);
    std::printf("wrote %s in %.2f s\n", summary->destination.c_str(), summary->seconds);
  }
  return 0;
}

// In the order of the CLI's --help, after the plan's rows (the write options' rows go before
// --force); the Python quantize() picks them by name, in its own order.
constexpr OptionRow<QuantizeFlags> kQuantizeRows[] = {
    {"SRC", "src", ParamType::kPath, "",
     "Source model folder or org/name: BF16/F16/F32, compressed-tensors (any --scheme format), or "
     "FP8 with 128x128 block scales (quant_method fp8, weight_scale_inv: DeepSeek-V3, Kimi K2), "
     "MXFP8 (quant_method mxfp8, E8M0 weight_scale_inv: MiniMax-M3, its DSpark draft), GPTQ "
     "(int2/4/8) or AWQ (int4, gemm; also AutoGPTQ's quantize_config.json or AutoAWQ's "
     "quant_config.json alone), or NVIDIA ModelOpt NVFP4/FP8, decoded on the fly "
     "(docs/formats.md)",
     &QuantizeFlags::source},
    {"DST", "dst", ParamType::kPath, "", "Output folder (must not exist unless --force)",
     &QuantizeFlags::destination},
    {"--target-precision", "target_precision", ParamType::kStr, "\"unquantized\"",
     "For drafts: the precision of the target the draft was trained against: unquantized (or "
     "bf16, f16, f32), a weight format (int4, int8, fp8, fp4) or a scheme name (w4a16 is int4, "
     "nvfp4 fp4). Recorded in config.json as its weight format for `check --target`, which warns "
     "when the target's differs",
     &QuantizeFlags::target_precision},
    {"--method", "method", ParamType::kStr, "\"rtn\"",
     "Scale choice: rtn (min-max round-to-nearest, bit-exact with llm-compressor) or search "
     "(per-group scale search for a lower reconstruction error, same format)",
     &QuantizeFlags::method},
    {"--force", "force", ParamType::kBool, "False", "Replace DST if it exists",
     &QuantizeFlags::force},
    {"--dry-run", "dry_run", ParamType::kBool, "False", "Plan and report only; write nothing",
     &QuantizeFlags::dry_run},
    {"--part", "part", ParamType::kOptionalStr, "None",
     "Write part I of the job split into N (I/N, e.g. 2/3) for `sparkulator merge`: the output "
     "shards of a share of the source shards (whole shards, even bytes), with config.json, the "
     "index, the other files and sparkulator-part.json. Run every part (one per machine: "
     "scripts/distributed/), then merge DST PART...; the result is byte for byte the "
     "single-machine output (docs/distributed.md)",
     &QuantizeFlags::part},
    {"--resume", "resume", ParamType::kBool, "False",
     "Continue an interrupted run of the same job: the unfinished output folder is kept beside "
     "DST (.DST.tmp-unfinished) when a run fails or is killed, each shard finished is recorded "
     "with its content hash, and --resume takes over those whose hash still matches and writes "
     "the rest, ending with the same bytes as one uninterrupted run. A run with other options or "
     "another source starts afresh",
     &QuantizeFlags::resume},
};

}  // namespace

std::span<const OptionRow<QuantizeFlags>> QuantizeOptionRows() { return kQuantizeRows; }

Status ApplyQuantizeFlags(const QuantizeFlags& flags, QuantizeOptions* options) {
  options->source = flags.source;
  options->destination = flags.destination;
  SPK_RETURN_IF_ERROR(ApplyPlanFlags(flags, options));
  SPK_ASSIGN_OR_RETURN(options->method, ParseQuantMethod(flags.method));
  SPK_ASSIGN_OR_RETURN(options->target_precision, ParseTargetPrecision(flags.target_precision));
  options->force = flags.force;
  options->dry_run = flags.dry_run;
  options->resume = flags.resume;
  options->durability = flags.WriteDurability();
  if (!flags.part.empty()) {
    SPK_ASSIGN_OR_RETURN(options->part, ParsePart(flags.part));
  }
  return Status::Ok();
}

void AddQuantizeCommand(CLI::App& app, CommandBody* run) {
  auto flags = std::make_shared<QuantizeFlags>();
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "Quantize a safetensors checkpoint (folder or Hugging Face repo id in the local cache) into "
      "a "
      "compressed-tensors pack-quantized checkpoint that vLLM loads on its Marlin path. The output "
      "is written to a temporary folder beside DST and renamed at the end.");
  AddPlanFlags(sub, flags.get());
  // --help lists the write options after --method and --shard after --part, as it always has.
  const auto [before_force, from_force] = SplitRowsAt(QuantizeOptionRows(), "--force");
  const auto [before_resume, from_resume] = SplitRowsAt(from_force, "--resume");
  AddOptionRows(sub, before_force, flags.get());
  AddOptionRows(sub, WriteOptionRows(), flags.get());
  AddOptionRows(sub, before_resume, flags.get());
  // The old spelling, CLI only: "shard" is a safetensors file everywhere else in the tool.
  auto old_part = std::make_shared<std::string>();
  sub->add_option("--shard", *old_part, "The old name of --part (I/N); says so when used")
      ->excludes("--part");
  AddOptionRows(sub, from_resume, flags.get());
  sub->add_flag("--json", *json, "Print a machine-readable summary on stdout");
  sub->callback([=] {
    *run = [=] {
      if (!old_part->empty()) {
        std::fprintf(stderr,
                     "sparkulator: --shard is the old name of --part (a part of a split job; a "
                     "shard is a safetensors file): use --part %s\n",
                     old_part->c_str());
        flags->part = *old_part;
      }
      return RunQuantize(*flags, *json);
    };
  });
}

}  // namespace spk::cli
