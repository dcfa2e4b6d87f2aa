// libFuzzer target: the SSE parser must never crash, and splitting the input at any point must give
// the same events as feeding it whole.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "http/sse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t cut = data[0] % size;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  cut = std::min(cut, input.size());

  spk::http::SseParser whole(1 << 16), split(1 << 16);
  std::vector<spk::http::SseEvent> a, b;
  bool ok_whole = whole.Feed(input, &a).ok();
  bool ok_split =
      split.Feed(input.substr(0, cut), &b).ok() && split.Feed(input.substr(cut), &b).ok();
  if (ok_whole != ok_split) std::abort();
  if (!ok_whole) return 0;
  whole.Finish(&a);
  split.Finish(&b);
  if (a.size() != b.size()) std::abort();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].data != b[i].data || a[i].event != b[i].event || a[i].valid_utf8 != b[i].valid_utf8) {
      std::abort();
    }
    bool valid = spk::http::IsValidUtf8(a[i].data) && spk::http::IsValidUtf8(a[i].event);
    if (a[i].valid_utf8 != valid) std::abort();
  }
  size_t prefix = spk::http::CompleteUtf8Prefix(input);
  if (prefix > input.size() || input.size() - prefix > 3) std::abort();
  return 0;
}
