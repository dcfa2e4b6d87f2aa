#include "http/prometheus.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace spk::http {
namespace {

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

void SkipBlanks(std::string_view line, size_t* pos) {
  while (*pos < line.size() && (line[*pos] == ' ' || line[*pos] == '\t')) ++*pos;
}

std::string_view ReadName(std::string_view line, size_t* pos, bool allow_colon) {
  size_t start = *pos;
  while (*pos < line.size() && IsNameChar(line[*pos]) && (allow_colon || line[*pos] != ':') &&
         (*pos > start || IsNameStart(line[*pos]))) {
    ++*pos;
  }
  return line.substr(start, *pos - start);
}

Result<double> ParseValue(std::string_view token) {
  if (token == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (token == "+Inf" || token == "Inf") return std::numeric_limits<double>::infinity();
  if (token == "-Inf") return -std::numeric_limits<double>::infinity();
  std::string copy(token);
  bool plain = !copy.empty();
  for (char c : copy) {
    bool ok = (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
    plain = plain && ok;
  }
  char* end = nullptr;
  double value = plain ? std::strtod(copy.c_str(), &end) : 0;
  if (!plain || end != copy.c_str() + copy.size()) {
    return Status::InvalidInput("bad sample value '" + copy + "'");
  }
  return value;
}

Status ParseLabels(std::string_view line, size_t* pos, MetricSample* sample) {
  ++*pos;  // '{'
  for (;;) {
    SkipBlanks(line, pos);
    if (*pos < line.size() && line[*pos] == '}') {
      ++*pos;
      return Status::Ok();
    }
    std::string_view name = ReadName(line, pos, /*allow_colon=*/false);
    if (name.empty()) return Status::InvalidInput("expected a label name");
    SkipBlanks(line, pos);
    if (*pos >= line.size() || line[*pos] != '=')
      return Status::InvalidInput("expected '=' after label");
    ++*pos;
    SkipBlanks(line, pos);
    if (*pos >= line.size() || line[*pos] != '"') return Status::InvalidInput("expected '\"'");
    ++*pos;
    std::string value;
    for (;;) {
      if (*pos >= line.size()) return Status::InvalidInput("unterminated label value");
      char c = line[(*pos)++];
      if (c == '"') break;
      if (c != '\\') {
        value.push_back(c);
        continue;
      }
      if (*pos >= line.size()) return Status::InvalidInput("unterminated escape in label value");
      char e = line[(*pos)++];
      if (e == 'n') {
        value.push_back('\n');
      } else if (e == '\\' || e == '"') {
        value.push_back(e);
      } else {
        return Status::InvalidInput(std::string("unknown escape '\\") + e + "' in label value");
      }
    }
    sample->labels.emplace_back(std::string(name), std::move(value));
    SkipBlanks(line, pos);
    if (*pos < line.size() && line[*pos] == ',')
      ++*pos;
    else if (*pos >= line.size() || line[*pos] != '}')
      return Status::InvalidInput("expected ',' or '}'");
  }
}

Result<MetricSample> ParseSampleLine(std::string_view line) {
  MetricSample sample;
  size_t pos = 0;
  SkipBlanks(line, &pos);
  sample.name = std::string(ReadName(line, &pos, /*allow_colon=*/true));
  if (sample.name.empty()) return Status::InvalidInput("expected a metric name");
  if (pos < line.size() && line[pos] == '{') SPK_RETURN_IF_ERROR(ParseLabels(line, &pos, &sample));
  size_t before = pos;
  SkipBlanks(line, &pos);
  if (pos == before) return Status::InvalidInput("expected a space before the value");
  size_t start = pos;
  while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') ++pos;
  SPK_ASSIGN_OR_RETURN(sample.value, ParseValue(line.substr(start, pos - start)));
  SkipBlanks(line, &pos);
  if (pos < line.size()) {  // optional integer timestamp (milliseconds)
    std::string_view stamp = line.substr(pos);
    size_t k = stamp.front() == '-' ? 1 : 0;
    if (k == stamp.size()) return Status::InvalidInput("bad timestamp");
    for (; k < stamp.size(); ++k) {
      if (stamp[k] < '0' || stamp[k] > '9')
        return Status::InvalidInput("trailing text after the value");
    }
  }
  return sample;
}

}  // namespace

std::string MetricSample::Label(std::string_view label_name) const {
  for (const auto& [name, value] : labels) {
    if (name == label_name) return value;
  }
  return "";
}

Result<std::vector<MetricSample>> ParsePrometheusText(std::string_view text) {
  std::vector<MetricSample> samples;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    Result<MetricSample> sample = ParseSampleLine(line);
    if (!sample.ok()) {
      return Status::InvalidInput("metrics line " + std::to_string(line_number) + ": " +
                                  sample.status().message() + " in '" +
                                  std::string(line.substr(0, 200)) + "'");
    }
    samples.push_back(std::move(sample).value());
  }
  return samples;
}

}  // namespace spk::http
