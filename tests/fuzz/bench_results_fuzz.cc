// libFuzzer target: `sparkulator card --bench FILE` and `bench report FILE` read results files a
// user hands in. Whatever the bytes, reading them must give a value or a Status, never throw or
// read out of bounds; and a document bench::CheckResults accepts must render (every table, the
// chart, the card's benchmark section, the pooling) without an exception: the checker and the
// renderers agree on the shape. An exception escaping here is a crash to libFuzzer.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/report.h"
#include "card/card.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  (void)spk::bench::PoolResults({doc, doc}, {"a.json", "b.json"});
  if (!spk::bench::CheckResults(doc, "B.json").ok()) return 0;
  (void)spk::bench::RenderMarkdown(doc);
  (void)spk::bench::RenderSvg(doc);
  (void)spk::card::BenchSections({doc, doc}, {"a.json", "b.json"}, {"a.svg", "b.svg"});
  return 0;
}
