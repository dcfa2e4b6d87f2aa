// sparkulator._core: the nanobind module under the Python package (python/sparkulator/).
//
// call(function, request) runs a row of the package's one declaration (api.h: every function, its
// parameters and the library call it makes, the same the CLI's subcommand makes) and returns the
// JSON text `--json` prints (the package builds its dataclasses from it, so the fields are defined
// once, in C++); api() exports that table for python/generate_api.py; main() is the CLI itself
// (tools/cli.cc) for the console script.
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

#include "api.h"
#include "base/progress.h"
#include "base/status.h"
#include "base/version.h"
#include "commands.h"

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

// A function of the package (a row of api.h's table) on its request (JSON text), with its report's
// JSON text back.
std::string Call(const std::string& name, const std::string& request_json, nb::object on_progress) {
  const ApiCommand* command = FindApiCommand(name);
  if (command == nullptr) RaiseFor(Status::Usage("sparkulator._core has no function " + name));
  Result<ApiRequest> request = ApiRequest::Parse(*command, request_json);
  if (!request.ok()) RaiseFor(request.status());
  std::atomic<bool> cancel{false};
  Progress progress = Progress::Observed();
  const RunContext run{.progress = &progress, .cancel = &cancel};
  auto work = [&]() -> Result<std::string> { return command->run(*request, run); };
  return RunInterruptible(work, &cancel, progress, on_progress);
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
  m.def("call", &sp::Call, "function"_a, "request"_a, "on_progress"_a.none(),
        "Runs the package function `function` (a row of python/src/api.h) on its request, JSON "
        "text of every parameter; returns its report's JSON text.");
  m.def(
      "api", [] { return spk::python::ApiCommandsJson().dump(2); },
      "The table of the package's functions (python/src/api.h) as JSON, for generate_api.py.");
}
