// `sparkulator inspect CKPT`: what is in a checkpoint and what quantize (or vLLM) does with each
// tensor.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "inspect/report.h"
#include "plan_flags.h"

namespace spk::cli {

void AddInspectCommand(CLI::App& app, CommandBody* run) {
  auto options = std::make_shared<QuantizeOptions>();
  auto flags = std::make_shared<PlanFlags>();
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "inspect",
      "Show a checkpoint's tensors, the detected draft family, the quantization plan with its "
      "reasons, the size before and after, and the vllm serve line. Writes nothing. On a "
      "compressed-tensors checkpoint, shows its scheme and quantized modules.");
  sub->add_option("CKPT", options->source, "Model folder or org/name")->required();
  AddPlanFlags(sub, flags.get());
  sub->add_flag("--json", *json, "Print the report as JSON");
  sub->callback([=] {
    *run = [=] {
      QuantizeOptions o = *options;
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
