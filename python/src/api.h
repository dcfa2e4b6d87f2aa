// The Python API's one declaration: every function of the sparkulator package (quantize, inspect,
// check, compare, dequantize, merge, example, card, bench, bench_report) as a row of kApiCommands,
// with its parameters in Python order (name, Python type, default, doc), what it returns and
// raises, and the function that turns a request into the library call.
//
// Who reads it: python/src/module.cc calls a row (`_core.call(name, request, on_progress)`) and
// exports the whole table as JSON (`_core.api()`); python/generate_api.py writes the package's
// python/sparkulator/_api.py from that JSON (signatures, defaults, docstrings), and
// tests/python/test_python_api.py checks the committed file is what the generator writes. A new
// parameter is one row here plus its line in the command's Run function.
//
// Errors: a request whose keys or value types do not match its row is Usage (ValueError in Python)
// naming the function and the parameter; a row's Run returns the library's Status. No exception
// leaves these functions except std::bad_alloc.
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "io/run_context.h"
#include "option_table.h"

namespace spk::python {

struct ApiParam {
  std::string_view name;
  ParamType type;
  std::string_view python_default;  // a Python literal; "" for a required parameter
  std::string_view doc;
};

class ApiRequest;

// The package's function returns `type` when the report's JSON has a true `when` key (the first
// such row), else the row without `when`. A `type` of "dict" returns the JSON object as it is (a
// report too open for a dataclass: bench's results).
struct ApiReturn {
  std::string_view type;
  std::string_view when;
};

struct ApiCommand {
  std::string_view name;
  std::string_view doc;  // the docstring's text before Args
  std::vector<ApiParam> params;
  std::vector<ApiReturn> returns;
  std::string_view returns_doc;
  std::string_view raises_doc;
  // The library call: its report's JSON text (what the CLI's --json prints).
  // `run` holds the progress counts the package draws and the flag Ctrl-C sets; the row's function
  // adds what its request says of the context (threads).
  Result<std::string> (*run)(const ApiRequest& request, RunContext run);
};

// The rows of bench and bench_report (python/src/api_bench.cc), which ApiCommands() ends with.
std::vector<ApiCommand> BenchApiCommands();

// Every function of the package, in the order of its __all__.
const std::vector<ApiCommand>& ApiCommands();
const ApiCommand* FindApiCommand(std::string_view name);

// The table as JSON for python/generate_api.py and _call.py: [{name, doc, params: [{name, type,
// passed_as, default, doc}], returns: [{type, when}], returns_doc, raises_doc}].
nlohmann::ordered_json ApiCommandsJson();

// An int parameter the library takes as `int`: Usage naming it when it does not fit.
Result<int> IntOf(std::string_view name, int64_t value);
// One it takes as a non-negative uint64_t (a seed): Usage naming it when negative.
Result<uint64_t> SeedOf(std::string_view name, int64_t value);

// A parameter declared by an option row (tools/option_table.h), as the row's ApiParam.
template <typename Flags>
ApiParam ParamOf(std::span<const cli::OptionRow<Flags>> rows, std::string_view python) {
  for (const cli::OptionRow<Flags>& row : rows) {
    if (row.python == python) return ApiParam{row.python, row.type, row.python_default, row.help};
  }
  return ApiParam{python, ParamType::kProgress, "",
                  "(no such option row)"};  // a bug: Parse refuses it
}

// A request checked against its row: every declared parameter present with a value of its type,
// nothing else. Accessors take a declared name (anything else is a bug in the row's Run).
class ApiRequest {
 public:
  static Result<ApiRequest> Parse(const ApiCommand& command, std::string_view json_text);

  std::string Str(std::string_view name) const;  // kPath, kStr
  std::optional<std::string> OptionalStr(std::string_view name) const;
  int64_t Int(std::string_view name) const;
  std::optional<int64_t> OptionalInt(std::string_view name) const;
  double Float(std::string_view name) const;
  bool Bool(std::string_view name) const;
  std::vector<std::string> StrList(std::string_view name) const;

  // The fields of `flags` that option rows set, each from its parameter (None leaves a field that
  // is not a std::optional as it is, the CLI's default): Usage for an int that does not fit or a
  // negative count.
  template <typename Flags>
  Status ReadOptionRows(std::span<const cli::OptionRow<Flags>> rows,
                        std::type_identity_t<Flags>* flags) const {
    for (const cli::OptionRow<Flags>& row : rows) {
      Status s =
          std::visit([&](auto member) { return Read(row.python, &(flags->*member)); }, row.field);
      if (!s.ok()) return s;
    }
    return Status::Ok();
  }

 private:
  explicit ApiRequest(nlohmann::json values) : values_(std::move(values)) {}
  const nlohmann::json& Get(std::string_view name) const;
  Status Read(std::string_view name, std::string* out) const;
  Status Read(std::string_view name, std::optional<int64_t>* out) const;
  Status Read(std::string_view name, int* out) const;
  Status Read(std::string_view name, int64_t* out) const;
  Status Read(std::string_view name, uint64_t* out) const;
  Status Read(std::string_view name, double* out) const;
  Status Read(std::string_view name, std::vector<std::string>* out) const;
  Status Read(std::string_view name, bool* out) const;
  nlohmann::json values_;
};

}  // namespace spk::python
