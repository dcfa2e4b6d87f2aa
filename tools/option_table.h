// One declaration per option, for the CLI flag and the Python parameter both (issue 39, "one
// option table"): a subcommand's rows give each option's CLI spelling, its Python name and type,
// its Python default, its help text (the CLI's --help and the Python docstring read the same text)
// and the field of the subcommand's flags struct it sets. tools/*_cmd.cc add their CLI11 options
// by walking the rows (AddOptionRows); python/src/api.cc declares the same rows as the function's
// parameters and sets the same fields from a request. The CLI's default is the flags struct's
// initial value; tests/python/test_api_parity.py checks it against the Python default.
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
// a std::string field means "" for None (the CLI's "not given").
template <typename Flags>
struct OptionRow {
  std::string_view flag;    // the CLI spelling, "--group-size"
  std::string_view python;  // the Python parameter, "group_size"
  ParamType type;
  std::string_view python_default;  // a Python literal; "" for a required parameter
  std::string_view help;
  std::variant<std::string Flags::*, std::optional<int64_t> Flags::*, int Flags::*,
               int64_t Flags::*, uint64_t Flags::*, std::vector<std::string> Flags::*,
               bool Flags::*>
      field;
};

// The CLI11 options of `rows`, bound to the fields of *flags (which must outlive parsing). A
// non-optional scalar shows its default in --help. A bool is a switch: one whose Python default is
// True is turned off by its flag (--no-vllm-map-build for vllm_map_build=False).
template <typename Flags>
void AddOptionRows(CLI::App* sub, std::span<const OptionRow<Flags>> rows, Flags* flags) {
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
    if (row.type == ParamType::kStr || row.type == ParamType::kInt) option->capture_default_str();
  }
}

}  // namespace cli
}  // namespace spk
