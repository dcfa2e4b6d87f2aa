// One declaration per option, for the CLI flag and the Python parameter both (issue 39, "one
// option table"): a subcommand's rows give each option's CLI spelling, its Python name and type,
// its Python default, its help text (the CLI's --help and the Python docstring read the same text)
// and the field of the subcommand's flags struct it sets. tools/*_cmd.cc add their CLI11 options
// by walking the rows (AddOptionRows); python/src/api.cc declares the same rows as the function's
// parameters and sets the same fields from a request. The CLI's default is the flags struct's
// initial value; tests/python/test_api_parity.py checks it against the Python default.
//
// A row whose flag has no leading dash is a positional argument (SRC, CKPT), required where its
// Python parameter is. A row's flag may carry aliases as CLI11 spells them ("-o,--output"). What
// only the CLI has (--json, compare's --top, quantize's old --shard) and the checks CLI11 makes
// while parsing (ExistingFile, PositiveNumber) stay beside the AddOptionRows call: the Python
// function leaves those to the library.
//
// A flags struct may derive from the library's options struct (bench's BenchFlags from
// bench::BenchConfig): a row then points at a base member, and AddOptionRows/ReadOptionRows of a
// base's rows (WriteOptionRows) take the derived flags.
//
// Rows are constant tables; nothing here fails at run time (a row whose field type does not fit
// its ParamType does not compile where it is visited).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace spk {

// A parameter's Python type; the Python request carries it as JSON (paths as strings, None as
// null).
enum class ParamType {
  kPath,          // PathLike (str or os.PathLike), a JSON string
  kOptionalPath,  // Optional[PathLike]
  kStr,
  kOptionalStr,
  kInt,
  kOptionalInt,
  kFloat,
  kBool,
  kStrList,   // Sequence[str]
  kPathList,  // Sequence[PathLike]
  kProgress,  // ProgressArg: stays in Python (the progress callback), never in the request
};

namespace cli {

// An option of the subcommand whose parsed flags are a `Flags`. An optional Python type set into
// a field that is not a std::optional means: None leaves the field's initial value, the CLI's
// default when the flag is not given ("" for a path or a name).
template <typename Flags>
struct OptionRow {
  std::string_view flag;    // the CLI spelling, "--group-size"; "SRC" for a positional
  std::string_view python;  // the Python parameter, "group_size"
  ParamType type;
  std::string_view python_default;  // a Python literal; "" for a required parameter
  std::string_view help;
  std::variant<std::string Flags::*, std::optional<int64_t> Flags::*, int Flags::*,
               int64_t Flags::*, uint64_t Flags::*, double Flags::*,
               std::vector<std::string> Flags::*, bool Flags::*>
      field;
  // Whether --help shows an Optional parameter's field initial value as the CLI's default
  // (--threads INT=0, where Python says None): only where that value means what None means.
  bool shows_default = false;
};

// The CLI11 options of `rows`, bound to the fields of *flags (which must outlive parsing). A
// non-optional scalar option (and a row that says shows_default) shows its default in --help. A
// bool is a switch: one whose Python default is True is turned off by its flag
// (--no-vllm-map-build for vllm_map_build=False).
template <typename Flags>
void AddOptionRows(CLI::App* sub, std::span<const OptionRow<Flags>> rows,
                   std::type_identity_t<Flags>* flags) {
  for (const OptionRow<Flags>& row : rows) {
    const std::string flag(row.flag), help(row.help);
    CLI::Option* option = std::visit(
        [&](auto member) -> CLI::Option* {
          if constexpr (std::is_same_v<decltype(member), bool Flags::*>) {
            if (row.python_default == "True") {
              return sub->add_flag(
                  flag, [flags, member](int64_t) { flags->*member = false; }, help);
            }
            return sub->add_flag(flag, flags->*member, help);
          } else {
            return sub->add_option(flag, flags->*member, help);
          }
        },
        row.field);
    const bool positional = !row.flag.starts_with('-');
    if (positional && row.python_default.empty()) option->required();
    const bool scalar = row.type == ParamType::kStr || row.type == ParamType::kInt ||
                        row.type == ParamType::kFloat || row.type == ParamType::kPath;
    if (!positional && (scalar || row.shows_default)) option->capture_default_str();
  }
}

// The rows of `rows` before the one whose flag is `flag`, and from it on (all and none when no row
// has it): for adding another table's rows, or a CLI-only option, in between.
template <typename Flags>
std::pair<std::span<const OptionRow<Flags>>, std::span<const OptionRow<Flags>>> SplitRowsAt(
    std::span<const OptionRow<Flags>> rows, std::string_view flag) {
  size_t i = 0;
  while (i < rows.size() && rows[i].flag != flag) ++i;
  return {rows.first(i), rows.subspan(i)};
}

}  // namespace cli
}  // namespace spk
