// libFuzzer target: the Prometheus text parser must never crash or read out of bounds, and every
// sample it returns must have a well-formed metric name.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "http/prometheus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto samples = spk::http::ParsePrometheusText(text);
  if (!samples.ok()) return 0;
  for (const auto& s : *samples) {
    if (s.name.empty()) std::abort();
    char c = s.name[0];
    if (c >= '0' && c <= '9') std::abort();
  }
  return 0;
}
