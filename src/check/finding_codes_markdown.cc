// `finding_codes_markdown`: prints docs/check.md's generated lists: the finding codes from the
// table of check/finding_codes.h (no argument), or the rules from the table of check/check_rules.h
// (`--rules`); with `--check FILE` says whether FILE's copies (between <!-- finding-codes:begin -->
// and <!-- finding-codes:end -->, and between <!-- check-rules:begin --> and
// <!-- check-rules:end -->) are those lists. Built with the tests; ctest runs
// `--check docs/check.md` as finding_codes_doc.
//
// Usage: finding_codes_markdown [--rules | --check FILE]
// Exit status: 0 printed / the copies match, 1 a copy differs or has no markers (one line on
// stderr naming FILE), 2 bad usage or FILE unreadable.
#include <cstdio>
#include <string>
#include <string_view>

#include "check/check_rules.h"
#include "check/finding_codes.h"
#include "io/file.h"

namespace {

struct Block {
  std::string_view name;  // the markers' word: <!-- NAME:begin --> ... <!-- NAME:end -->
  std::string text;
  std::string_view flag;  // how to print it
};

// 0 when `text` holds `block` between its markers, else 1 (said on stderr).
int CheckBlock(const std::string& path, const std::string& text, const Block& block) {
  const std::string begin = "<!-- " + std::string(block.name) + ":begin -->\n";
  const std::string end_marker = "<!-- " + std::string(block.name) + ":end -->";
  const size_t at = text.find(begin);
  const size_t end = at == std::string::npos ? at : text.find(end_marker, at);
  if (end == std::string::npos) {
    std::fprintf(stderr, "%s: no %s ... %s block\n", path.c_str(),
                 begin.substr(0, begin.size() - 1).c_str(), end_marker.c_str());
    return 1;
  }
  const size_t start = at + begin.size();
  if (text.substr(start, end - start) != block.text) {
    size_t line = 1;
    for (size_t i = 0; i < at; ++i) line += text[i] == '\n';
    std::fprintf(stderr,
                 "%s:%zu: the %s block differs from its table in src/check; paste the output of "
                 "build/src/check/finding_codes_markdown%s\n",
                 path.c_str(), line, std::string(block.name).c_str(),
                 std::string(block.flag).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Block codes{"finding-codes", spk::FindingCodesMarkdown(), ""};
  const Block rules{"check-rules", spk::check_internal::RulesMarkdown(), " --rules"};
  if (argc == 1) {
    std::fputs(codes.text.c_str(), stdout);
    return 0;
  }
  if (argc == 2 && std::string_view(argv[1]) == "--rules") {
    std::fputs(rules.text.c_str(), stdout);
    return 0;
  }
  if (argc == 3 && std::string_view(argv[1]) == "--check") {
    const std::string path = argv[2];
    auto text = spk::FileSystem::Default()->ReadFile(path);
    if (!text.ok()) {
      std::fprintf(stderr, "%s\n", text.status().message().c_str());
      return 2;
    }
    const int codes_differ = CheckBlock(path, *text, codes);
    const int rules_differ = CheckBlock(path, *text, rules);
    return codes_differ | rules_differ;
  }
  std::fprintf(stderr, "usage: %s [--rules | --check FILE]\n", argv[0]);
  return 2;
}
