// libFuzzer target: reading memory figures from a vLLM log (bench's launched arms) must never
// crash or read out of bounds, whatever the log holds, and every figure it returns came from a line
// it reports having read.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bench/memory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view log(reinterpret_cast<const char*>(data), size);
  spk::bench::LogMemory memory = spk::bench::ParseVllmLogMemory(log);
  bool any =
      memory.model_loading_gib || memory.target_checkpoint_gib || memory.draft_checkpoint_gib;
  if (any && memory.lines.empty()) std::abort();
  for (const auto& line : memory.lines) {
    if (log.find(line) == std::string_view::npos) std::abort();
  }
  (void)memory.ToJson().dump();
  return 0;
}
