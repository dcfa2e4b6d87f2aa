// sparkulator._core: the nanobind module under the Python package (python/sparkulator/).
//
// One function per subcommand calls the same library function the CLI's subcommand calls and
// returns the same JSON text `--json` prints (the package builds its dataclasses from it, so the
// fields are defined once, in C++); main() is the CLI itself (tools/cli.cc) for the console script.
//
// Threads and signals: each call runs the library on a worker thread while the calling thread,
// with the GIL released, wakes every 50 ms to pass progress to the Python callback and to run
// Python's signal handlers (PyErr_CheckSignals). A KeyboardInterrupt (or an exception from the
// callback) sets the cancel flag that the checkpoint writer polls between row blocks; the call then
// waits for the worker, which removes its temporary folder, and re-raises. Nothing is left behind.
// Errors: a non-OK Status becomes the Python exception for its code (RaiseFor) with the CLI's
// message; the module never lets a C++ exception other than nanobind's reach Python.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "base/version.h"
#include "check/check.h"
#include "checkpoint/family.h"
#include "commands.h"
#include "compare/compare.h"
#include "compare/report.h"
#include "dequantize/dequantize.h"
#include "inspect/report.h"
#include "quantize/merge.h"
#include "quantize/quantize.h"

namespace nb = nanobind;

namespace spk::python {
namespace {

// The Python exception for each Status code; the message is the CLI's, without its prefix.
[[noreturn]] void RaiseFor(const Status& status) {
  PyObject* type = PyExc_RuntimeError;  // kInternal: a bug in sparkulator
  switch (status.code()) {
    case StatusCode::kInvalidInput:
    case StatusCode::kUsage:
      type = PyExc_ValueError;
      break;
    case StatusCode::kNotFound:
      type = PyExc_FileNotFoundError;
      break;
    case StatusCode::kAlreadyExists:
      type = PyExc_FileExistsError;
      break;
    case StatusCode::kIoError:
      type = PyExc_OSError;
      break;
    case StatusCode::kUnavailable:
      type = PyExc_ConnectionError;
      break;
    case StatusCode::kCancelled:
      type = PyExc_KeyboardInterrupt;
      break;
    case StatusCode::kOk:
    case StatusCode::kInternal:
      break;
  }
  PyErr_SetString(type, status.message().c_str());
  throw nb::python_error();
}

// Calls on_progress(what, done, total, finished) when the snapshot changed since `last`.
void ReportProgress(const Progress& progress, nb::handle on_progress, Progress::Snapshot* last) {
  if (!on_progress.is_valid() || on_progress.is_none()) return;
  Progress::Snapshot now = progress.Current();
  if (now.what.empty()) return;
  if (now.what == last->what && now.done == last->done && now.total == last->total &&
      now.finished == last->finished) {
    return;
  }
  *last = now;
  on_progress(now.what, now.done, now.total, now.finished);
}

// Runs `work` on a worker thread (see the top of this file) and returns its JSON text, or raises.
std::string RunInterruptible(const std::function<Result<std::string>()>& work,
                             std::atomic<bool>* cancel, const Progress& progress,
                             nb::handle on_progress) {
  std::mutex mu;
  std::condition_variable finished;
  bool done = false;
  std::optional<Result<std::string>> result;
  std::exception_ptr failure;
  std::thread worker([&] {
    std::optional<Result<std::string>> r;
    std::exception_ptr f;
    try {
      r.emplace(work());
    } catch (...) {  // std::bad_alloc and the like: reported as RuntimeError below
      f = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu);
    result = std::move(r);
    failure = f;
    done = true;
    finished.notify_all();
  });
  std::optional<nb::python_error> interrupted;
  Progress::Snapshot last;
  for (;;) {
    {
      nb::gil_scoped_release unlocked;
      std::unique_lock<std::mutex> lock(mu);
      if (finished.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) break;
    }
    if (interrupted) continue;  // cancelled: only wait for the worker to clean up
    try {
      ReportProgress(progress, on_progress, &last);
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
    } catch (nb::python_error& e) {
      interrupted.emplace(std::move(e));
      cancel->store(true);
    }
  }
  worker.join();
  if (interrupted) throw std::move(*interrupted);
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      RaiseFor(Status::Internal(e.what()));
    }
  }
  if (!result->ok()) RaiseFor(result->status());
  ReportProgress(progress, on_progress, &last);
  return std::move(*result).value();
}

std::string RunWithoutProgress(const std::function<Result<std::string>()>& work) {
  std::atomic<bool> cancel{false};
  Progress none = Progress::Disabled();
  return RunInterruptible(work, &cancel, none, nb::none());
}

// The plan options quantize and inspect share (the CLI's --scheme ... --target-layers).
QuantizeOptions PlanOptions(std::string source, std::string scheme,
                            std::optional<int64_t> group_size, const std::string& preset,
                            std::vector<std::string> ignore, int tp,
                            std::optional<int64_t> target_layers) {
  Result<Preset> parsed = ParsePreset(preset);
  if (!parsed.ok()) RaiseFor(parsed.status());
  QuantizeOptions o;
  o.source = std::move(source);
  Result<SchemeSelection> selected = SelectScheme(scheme, group_size);
  if (!selected.ok()) RaiseFor(selected.status());
  o.plan.scheme = selected->scheme;
  o.plan.group_size = selected->group_size;
  o.plan.preset = *parsed;
  o.plan.ignore = std::move(ignore);
  o.plan.tp = tp;
  if (target_layers) o.plan.target_layers = *target_layers;
  return o;
}

Durability DurabilityFor(bool fsync) {
  return fsync ? Durability::kSynced : Durability::kPageCache;
}

std::string Quantize(std::string source, std::string destination, std::string scheme,
                     std::optional<int64_t> group_size, const std::string& preset,
                     std::vector<std::string> ignore, std::string method, int threads, bool force,
                     bool dry_run, std::string target_precision, int tp,
                     std::optional<int64_t> target_layers, bool fsync, bool resume,
                     std::optional<std::string> shard, nb::object on_progress) {
  QuantizeOptions o = PlanOptions(std::move(source), std::move(scheme), group_size, preset,
                                  std::move(ignore), tp, target_layers);
  o.destination = std::move(destination);
  Result<QuantMethod> parsed_method = ParseQuantMethod(method);
  if (!parsed_method.ok()) RaiseFor(parsed_method.status());
  o.method = *parsed_method;
  o.threads = threads;
  o.force = force;
  o.dry_run = dry_run;
  o.target_precision = std::move(target_precision);
  o.durability = DurabilityFor(fsync);
  o.resume = resume;
  if (shard) {
    Result<QuantizeOptions::Part> part = ParsePart(*shard);
    if (!part.ok()) RaiseFor(part.status());
    o.part = *part;
  }
  std::atomic<bool> cancel{false};
  Progress progress = Progress::Observed();
  auto work = [&]() -> Result<std::string> {
    SPK_ASSIGN_OR_RETURN(QuantizeSummary summary,
                         QuantizeCheckpoint(o, FileSystem::Default(), &progress, &cancel));
    return PlanReport(summary, /*with_tensors=*/true).dump();
  };
  return RunInterruptible(work, &cancel, progress, on_progress);
}

std::string Inspect(std::string checkpoint, std::string scheme, std::optional<int64_t> group_size,
                    const std::string& preset, std::vector<std::string> ignore, int tp,
                    std::optional<int64_t> target_layers) {
  QuantizeOptions o = PlanOptions(std::move(checkpoint), std::move(scheme), group_size, preset,
                                  std::move(ignore), tp, target_layers);
  return RunWithoutProgress([&]() -> Result<std::string> {
    SPK_ASSIGN_OR_RETURN(auto report, InspectCheckpoint(o, FileSystem::Default()));
    return report.dump();
  });
}

std::string Check(std::string checkpoint, std::string target, int tp,
                  std::optional<int64_t> target_layers, std::string vllm_version,
                  std::string vllm_dir, bool vllm_batch_invariant) {
  CheckOptions o;
  o.checkpoint = std::move(checkpoint);
  o.target = std::move(target);
  o.tp = tp;
  o.target_layers = target_layers;
  o.vllm_version = std::move(vllm_version);
  o.vllm_dir = std::move(vllm_dir);
  o.vllm_batch_invariant = vllm_batch_invariant;
  return RunWithoutProgress([&]() -> Result<std::string> {
    SPK_ASSIGN_OR_RETURN(CheckReport report, CheckCheckpoint(FileSystem::Default(), o));
    return CheckReportToJson(report).dump();
  });
}

std::string Compare(std::string source, std::string quantized,
                    std::optional<std::string> quantized2, std::optional<int> samples,
                    std::optional<uint64_t> seed) {
  CompareOptions o;
  o.source = std::move(source);
  o.quantized = std::move(quantized);
  if (samples) o.samples = *samples;
  if (seed) o.seed = *seed;
  return RunWithoutProgress([&]() -> Result<std::string> {
    if (quantized2) {
      SPK_ASSIGN_OR_RETURN(GainReport report, CompareGain(FileSystem::Default(), o, *quantized2));
      return GainReportToJson(report).dump();
    }
    SPK_ASSIGN_OR_RETURN(CompareReport report, CompareCheckpoints(FileSystem::Default(), o));
    return CompareReportToJson(report).dump();
  });
}

std::string Dequantize(std::string source, std::string destination, bool force, int threads,
                       bool fsync) {
  DequantizeOptions o;
  o.source = std::move(source);
  o.destination = std::move(destination);
  o.force = force;
  o.threads = threads;
  o.durability = DurabilityFor(fsync);
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  Progress none = Progress::Disabled();
  auto work = [&]() -> Result<std::string> {
    SPK_ASSIGN_OR_RETURN(DequantizeSummary summary, DequantizeCheckpoint(o, FileSystem::Default()));
    return DequantizeSummaryToJson(summary).dump();
  };
  return RunInterruptible(work, &cancel, none, nb::none());
}

std::string Merge(std::string destination, std::vector<std::string> parts, bool force, bool fsync) {
  MergeOptions o;
  o.destination = std::move(destination);
  o.parts = std::move(parts);
  o.force = force;
  o.durability = DurabilityFor(fsync);
  return RunWithoutProgress([&]() -> Result<std::string> {
    SPK_ASSIGN_OR_RETURN(MergeSummary summary, MergeParts(FileSystem::Default(), o));
    return MergeSummaryToJson(summary).dump();
  });
}

// The console script: the CLI on this thread, without the GIL. The CLI installs its own SIGINT
// handler for quantize; Python's are put back afterwards.
int Main(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, nullptr, &old_int);
  sigaction(SIGTERM, nullptr, &old_term);
  int code;
  {
    nb::gil_scoped_release unlocked;
    code = cli::RunCli(static_cast<int>(args.size()), argv.data());
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return code;
}

}  // namespace
}  // namespace spk::python

NB_MODULE(_core, m) {
  using namespace nb::literals;
  namespace sp = spk::python;
  m.doc() = "sparkulator's native core; use the functions of the sparkulator package instead.";
  m.attr("__version__") = spk::kSparkulatorVersion;
  m.def("main", &sp::Main, "argv"_a, "Runs the sparkulator command line; returns its exit code.");
  m.def("quantize", &sp::Quantize, "source"_a, "destination"_a, "scheme"_a, "group_size"_a.none(),
        "preset"_a, "ignore"_a, "method"_a, "threads"_a, "force"_a, "dry_run"_a,
        "target_precision"_a, "tp"_a, "target_layers"_a.none(), "fsync"_a, "resume"_a,
        "shard"_a.none(), "on_progress"_a.none(), "quantize --json, as JSON text.");
  m.def("inspect", &sp::Inspect, "checkpoint"_a, "scheme"_a, "group_size"_a.none(), "preset"_a,
        "ignore"_a, "tp"_a, "target_layers"_a.none(), "inspect --json, as JSON text.");
  m.def("check", &sp::Check, "checkpoint"_a, "target"_a, "tp"_a, "target_layers"_a.none(),
        "vllm_version"_a, "vllm_dir"_a, "vllm_batch_invariant"_a, "check --json, as JSON text.");
  m.def("compare", &sp::Compare, "source"_a, "quantized"_a, "quantized2"_a.none(),
        "samples"_a.none(), "seed"_a.none(), "compare --json, as JSON text.");
  m.def("merge", &sp::Merge, "destination"_a, "parts"_a, "force"_a, "fsync"_a,
        "merge --json, as JSON text.");
  m.def("dequantize", &sp::Dequantize, "source"_a, "destination"_a, "force"_a, "threads"_a,
        "fsync"_a, "dequantize --json, as JSON text.");
}
