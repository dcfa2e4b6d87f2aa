// Parser for the Prometheus text exposition format (what GET /metrics returns on vLLM, llama-server
// and SGLang): `name{label="value",...} value [timestamp]` lines, `#` comment/HELP/TYPE lines.
//
// Label values may contain the escapes \\, \" and \n. Values may be NaN, +Inf, -Inf or any float.
// Ownership: samples are returned by value. Thread safety: pure functions. Error policy: no
// exceptions; a malformed line makes ParsePrometheusText return InvalidInput naming the line
// number.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace spk::http {

struct MetricSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in the order written, unescaped
  double value = 0;

  // The value of the label with this name, or "" when absent.
  std::string Label(std::string_view label_name) const;
};

Result<std::vector<MetricSample>> ParsePrometheusText(std::string_view text);

}  // namespace spk::http
