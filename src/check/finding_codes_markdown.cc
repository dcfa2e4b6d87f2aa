// `finding_codes_markdown`: prints docs/check.md's list of finding codes from the table of
// check/finding_codes.h, or with `--check FILE` says whether FILE's copy (between
// <!-- finding-codes:begin --> and <!-- finding-codes:end -->) is that list. Built with the tests;
// ctest runs `--check docs/check.md` as finding_codes_doc.
//
// Usage: finding_codes_markdown [--check FILE]
// Exit status: 0 printed / the copy matches, 1 the copy differs or has no markers (one line on
// stderr naming FILE), 2 bad usage or FILE unreadable.
#include <cstdio>
#include <string>
#include <string_view>

#include "check/finding_codes.h"
#include "io/file.h"

namespace {

constexpr std::string_view kBegin = "<!-- finding-codes:begin -->\n";
constexpr std::string_view kEnd = "<!-- finding-codes:end -->";

int CheckDoc(const std::string& path) {
  auto text = spk::FileSystem::Default()->ReadFile(path);
  if (!text.ok()) {
    std::fprintf(stderr, "%s\n", text.status().message().c_str());
    return 2;
  }
  const size_t begin = text->find(kBegin);
  const size_t end = begin == std::string::npos ? begin : text->find(kEnd, begin);
  if (end == std::string::npos) {
    std::fprintf(stderr, "%s: no %.*s ... %.*s block with the finding codes\n", path.c_str(),
                 static_cast<int>(kBegin.size() - 1), kBegin.data(), static_cast<int>(kEnd.size()),
                 kEnd.data());
    return 1;
  }
  const size_t start = begin + kBegin.size();
  if (text->substr(start, end - start) != spk::FindingCodesMarkdown()) {
    size_t line = 1;
    for (size_t i = 0; i < begin; ++i) line += (*text)[i] == '\n';
    std::fprintf(stderr,
                 "%s:%zu: the finding codes differ from src/check/finding_codes.h's table; paste "
                 "the output of build/src/check/finding_codes_markdown\n",
                 path.c_str(), line);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 1) {
    std::fputs(spk::FindingCodesMarkdown().c_str(), stdout);
    return 0;
  }
  if (argc == 3 && std::string_view(argv[1]) == "--check") return CheckDoc(argv[2]);
  std::fprintf(stderr, "usage: %s [--check FILE]\n", argv[0]);
  return 2;
}
