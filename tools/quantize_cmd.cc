// `sparkulator quantize SRC DST`: writes a compressed-tensors checkpoint (see
// src/quantize/quantize.h).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "inspect/report.h"
#include "plan_flags.h"

namespace spk::cli {
namespace {

std::atomic<bool> g_interrupted{false};  // set by SIGINT/SIGTERM; the run stops and cleans up

void OnSignal(int) { g_interrupted = true; }

int RunQuantize(QuantizeOptions options, const PlanFlags& flags, int threads, bool json) {
  Status applied = ApplyPlanFlags(flags, &options);
  if (!applied.ok()) return ReportError(applied);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  Progress progress = Progress::ForStderr();
  const RunContext run{.progress = &progress, .cancel = &g_interrupted, .threads = threads};
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

}  // namespace

void AddQuantizeCommand(CLI::App& app, CommandBody* run) {
  auto options = std::make_shared<QuantizeOptions>();
  auto flags = std::make_shared<PlanFlags>();
  auto json = std::make_shared<bool>(false);
  auto no_fsync = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "Quantize a safetensors checkpoint (folder or Hugging Face repo id in the local cache) into "
      "a "
      "compressed-tensors pack-quantized checkpoint that vLLM loads on its Marlin path. The output "
      "is written to a temporary folder beside DST and renamed at the end.");
  sub->add_option("SRC", options->source,
                  "Source model folder or org/name: BF16/F16/F32, compressed-tensors (any "
                  "--scheme format), or FP8 with 128x128 block scales (quant_method fp8, "
                  "weight_scale_inv: DeepSeek-V3, Kimi K2), MXFP8 (quant_method mxfp8, E8M0 "
                  "weight_scale_inv: MiniMax-M3, its DSpark draft), GPTQ (int2/4/8) or AWQ (int4, "
                  "gemm; also AutoGPTQ's quantize_config.json or AutoAWQ's quant_config.json "
                  "alone), or NVIDIA ModelOpt NVFP4/FP8, decoded on the fly (docs/formats.md)")
      ->required();
  sub->add_option("DST", options->destination, "Output folder (must not exist unless --force)")
      ->required();
  AddPlanFlags(sub, flags.get());
  auto precision = std::make_shared<std::string>(options->target_precision.Name());
  sub->add_option("--target-precision", *precision,
                  "For drafts: the precision of the target the draft was trained against: "
                  "unquantized (or bf16, f16, f32), a weight format (int4, int8, fp8, fp4) or a "
                  "scheme name (w4a16 is int4, nvfp4 fp4). Recorded in config.json as its weight "
                  "format for `check --target`, which warns when the target's differs")
      ->capture_default_str();
  auto method = std::make_shared<std::string>(QuantMethodName(options->method));
  sub->add_option("--method", *method,
                  "Scale choice: rtn (min-max round-to-nearest, bit-exact with llm-compressor) or "
                  "search (per-group scale search for a lower reconstruction error, same format)")
      ->capture_default_str();
  auto threads = std::make_shared<int>(0);
  AddWriteFlags(sub, threads.get(), no_fsync.get());
  sub->add_flag("--force", options->force, "Replace DST if it exists");
  sub->add_flag("--dry-run", options->dry_run, "Plan and report only; write nothing");
  auto part = std::make_shared<std::string>();
  auto old_part = std::make_shared<std::string>();
  sub->add_option("--part", *part,
                  "Write part I of the job split into N (I/N, e.g. 2/3) for `sparkulator merge`: "
                  "the output shards of a share of the source shards (whole shards, even bytes), "
                  "with config.json, the index, the other files and sparkulator-part.json. Run "
                  "every part (one per machine: scripts/distributed/), then merge DST PART...; the "
                  "result is byte for byte the single-machine output (docs/distributed.md)");
  // The old spelling: "shard" is a safetensors file everywhere else in the tool.
  sub->add_option("--shard", *old_part, "The old name of --part (I/N); says so when used")
      ->excludes("--part");
  sub->add_flag("--resume", options->resume,
                "Continue an interrupted run of the same job: the unfinished output folder is "
                "kept beside DST (.DST.tmp-unfinished) when a run fails or is killed, each shard "
                "finished is recorded with its content hash, and --resume takes over those whose "
                "hash still matches and writes the rest, ending with the same bytes as one "
                "uninterrupted run. A run with other options or another source starts afresh");
  sub->add_flag("--json", *json, "Print a machine-readable summary on stdout");
  sub->callback([=] {
    options->durability = *no_fsync ? Durability::kPageCache : Durability::kSynced;
    *run = [=] {
      Result<QuantMethod> parsed = ParseQuantMethod(*method);
      if (!parsed.ok()) return ReportError(parsed.status());
      options->method = *parsed;
      Result<TargetPrecision> target_precision = ParseTargetPrecision(*precision);
      if (!target_precision.ok()) return ReportError(target_precision.status());
      options->target_precision = *target_precision;
      if (!old_part->empty()) {
        std::fprintf(stderr,
                     "sparkulator: --shard is the old name of --part (a part of a split job; a "
                     "shard is a safetensors file): use --part %s\n",
                     old_part->c_str());
        *part = *old_part;
      }
      if (!part->empty()) {
        Result<QuantizeOptions::Part> parsed_part = ParsePart(*part);
        if (!parsed_part.ok()) return ReportError(parsed_part.status());
        options->part = *parsed_part;
      }
      return RunQuantize(*options, *flags, *threads, *json);
    };
  });
}

}  // namespace spk::cli
