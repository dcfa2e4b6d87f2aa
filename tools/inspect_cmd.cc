// `sparkulator inspect CKPT`: what is in a checkpoint and what quantize (or vLLM) does with each
// tensor.
#include <cstdio>
#include <memory>

#include "command_flags.h"
#include "commands.h"
#include "inspect/report.h"

namespace spk::cli {
namespace {

// CKPT; the options are the plan's rows (tools/plan_flags.h).
constexpr OptionRow<InspectFlags> kInspectRows[] = {
    {"CKPT", "ckpt", ParamType::kPath, "", "Model folder or org/name", &InspectFlags::checkpoint},
};

}  // namespace

std::span<const OptionRow<InspectFlags>> InspectOptionRows() { return kInspectRows; }

void AddInspectCommand(CLI::App& app, CommandBody* run) {
  auto flags = std::make_shared<InspectFlags>();
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "inspect",
      "Show a checkpoint's tensors, the detected draft family, the quantization plan with its "
      "reasons, the size before and after, and the vllm serve line. Writes nothing. On a "
      "compressed-tensors checkpoint, shows its scheme and quantized modules.");
  AddOptionRows(sub, InspectOptionRows(), flags.get());
  AddPlanFlags(sub, flags.get());
  sub->add_flag("--json", *json, "Print the report as JSON");
  sub->callback([=] {
    *run = [=] {
      QuantizeOptions o;
      o.source = flags->checkpoint;
      Status applied = ApplyPlanFlags(*flags, &o);
      if (!applied.ok()) return ReportError(applied);
      auto report = InspectCheckpoint(RunContext{}, o);
      if (!report.ok()) return ReportError(report.status());
      if (*json) {
        std::printf("%s\n", report->dump(2).c_str());
      } else {
        std::fputs(RenderReport(*report, true).c_str(), stdout);
      }
      return 0;
    };
  });
}

}  // namespace spk::cli
