// The finding code table (check/finding_codes.h): codes unique and kebab-case, every row complete,
// every row referenced by a checker source (an Add or a rule table), the markdown lists every code,
// and MakeFinding gives the code string and the row's severity.
#include "check/finding_codes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace spk {
namespace {

// "dflash-qkv-quantized" -> "kDflashQkvQuantized", the enumerator's name.
std::string EnumeratorName(std::string_view code) {
  std::string out = "k";
  bool upper = true;
  for (char c : code) {
    if (c == '-') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

TEST(FindingCodes, CodesAreUniqueAndKebabCase) {
  const std::regex kebab("[a-z][a-z0-9]*(-[a-z0-9]+)+");
  std::set<std::string_view> seen;
  for (const FindingCodeRow& row : kFindingCodes) {
    EXPECT_TRUE(std::regex_match(std::string(row.code), kebab)) << row.code;
    EXPECT_TRUE(seen.insert(row.code).second) << "duplicate code " << row.code;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(FindingCode::kCount));
}

TEST(FindingCodes, EveryRowIsComplete) {
  for (const FindingCodeRow& row : kFindingCodes) {
    EXPECT_NE(row.severities, 0) << row.code;
    EXPECT_EQ(row.severities & ~(kErr | kWarn | kInfo), 0) << row.code;
    EXPECT_FALSE(row.doc.empty()) << row.code;
    EXPECT_FALSE(row.raised_by.empty()) << row.code;
    // One markdown table cell each.
    for (std::string_view text : {row.doc, row.raised_by}) {
      EXPECT_EQ(text.find('|'), std::string_view::npos) << row.code << ": " << text;
      EXPECT_EQ(text.find('\n'), std::string_view::npos) << row.code << ": " << text;
    }
  }
}

// No grep in C++, but the sources are at hand: every row is named by a checker source as
// FindingCode::kName (an Add, a MakeFinding or a rule table), and the files a row says raise it
// exist.
TEST(FindingCodes, EveryRowIsRaisedSomewhere) {
  const char* root = std::getenv("SPK_SOURCE_DIR");
  if (root == nullptr) GTEST_SKIP() << "SPK_SOURCE_DIR is not set (ctest sets it)";
  const std::filesystem::path dir = std::filesystem::path(root) / "src" / "check";
  std::string sources;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".cc") || name.ends_with("_test.cc") || name.starts_with("finding_codes")) {
      continue;
    }
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    sources += text.str();
  }
  ASSERT_FALSE(sources.empty()) << dir;
  const std::regex file("[a-z_]+\\.cc");
  for (const FindingCodeRow& row : kFindingCodes) {
    const std::string name = "FindingCode::" + EnumeratorName(row.code);
    EXPECT_EQ(static_cast<size_t>(row.id), static_cast<size_t>(&row - kFindingCodes.data()));
    EXPECT_NE(sources.find(name), std::string::npos) << row.code << ": no source names " << name;
    const std::string raised_by(row.raised_by);
    for (auto it = std::sregex_iterator(raised_by.begin(), raised_by.end(), file);
         it != std::sregex_iterator(); ++it) {
      EXPECT_TRUE(std::filesystem::exists(dir / it->str())) << row.code << ": " << it->str();
    }
  }
}

TEST(FindingCodes, MarkdownListsEveryCode) {
  const std::string md = FindingCodesMarkdown();
  EXPECT_TRUE(md.starts_with("| code | severity | what | raised by |\n|---|---|---|---|\n"));
  for (const FindingCodeRow& row : kFindingCodes) {
    EXPECT_NE(
        md.find("| `" + std::string(row.code) + "` | " + SeveritiesInWords(row.severities) + " | "),
        std::string::npos)
        << row.code;
  }
  EXPECT_EQ(std::count(md.begin(), md.end(), '\n'), kFindingCodes.size() + 2);
}

TEST(FindingCodes, FindingsCarryTheRowsCodeAndSeverity) {
  Finding f = MakeFinding(FindingCode::kMissingWeightScale, "m", "f.safetensors", "msg", "fix");
  EXPECT_EQ(f.code, "missing-weight-scale");
  EXPECT_EQ(f.severity, Severity::kError);
  EXPECT_EQ(MakeFinding(FindingCode::kIndexMissing, "", "", "", "").severity, Severity::kWarning);
  EXPECT_EQ(MakeFinding(FindingCode::kVllmMapArchitectureUnknown, "", "", "", "").severity,
            Severity::kInfo);
  Finding w = MakeFinding(FindingCode::kQuantArgsKey, Severity::kWarning, "zp_dtype", "config.json",
                          "msg", "fix");
  EXPECT_EQ(w.code, "quant-args-key");
  EXPECT_EQ(w.severity, Severity::kWarning);
  EXPECT_FALSE(HasOneSeverity(FindingCode::kDflashQkvQuantized));
  EXPECT_EQ(SeveritiesInWords(RowOf(FindingCode::kDflashQkvQuantized).severities),
            "error / warning / info");
  static_assert(FixedCode(FindingCode::kKernelRulePlatform).severity() == Severity::kWarning);
}

}  // namespace
}  // namespace spk
