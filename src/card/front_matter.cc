#include "card/front_matter.h"

#include <set>
#include <utility>
#include <vector>

#include "base/lines.h"
#include "card/card.h"

namespace spk::card {
namespace {

constexpr const char* kFence = "---\n";

struct Page {
  std::string front_matter;  // without the fences
  std::string body;
};

Page SplitPage(const std::string& text) {
  if (text.rfind(kFence, 0) != 0) return {"", text};
  size_t end = text.find("\n---\n", 3);
  if (end == std::string::npos) return {"", text};
  return {text.substr(4, end - 3), text.substr(end + 5)};
}

// Top-level blocks: (key, the block's text with its trailing newline).
std::vector<std::pair<std::string, std::string>> Blocks(const std::string& front_matter) {
  std::vector<std::pair<std::string, std::string>> blocks;
  for (std::string_view line_view : SplitLines(front_matter)) {
    std::string line(line_view);
    bool continuation = !line.empty() && (line[0] == ' ' || line[0] == '-' || line[0] == '\t');
    if (continuation && !blocks.empty()) {
      blocks.back().second += line + "\n";
    } else if (size_t colon = line.find(':'); colon != std::string::npos) {
      blocks.emplace_back(line.substr(0, colon), line + "\n");
    }
  }
  return blocks;
}

std::string Unquote(std::string v) {
  size_t first = v.find_first_not_of(" \t");
  v = first == std::string::npos ? "" : v.substr(first);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.pop_back();
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
    v = v.substr(1, v.size() - 2);
  }
  return v;
}

// A YAML scalar: plain when it is made of safe characters, else double-quoted.
std::string Quote(const std::string& v) {
  bool plain = !v.empty();
  for (char c : v) {
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
                      c == '.' || c == '/');
  }
  if (plain) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::vector<std::string> Tags(const OwnedKeys& keys) {
  std::vector<std::string> tags = {"compressed-tensors", "sparkulator"};
  if (!keys.scheme.empty()) tags.push_back(keys.scheme);
  if (!keys.number_type.empty()) tags.push_back(keys.number_type);
  if (!keys.family.empty() && keys.family != "llm") {
    tags.push_back("speculative-decoding");
    tags.push_back(keys.family);
  }
  return tags;
}

}  // namespace

std::string FrontMatterScalar(const std::string& text, const std::string& key) {
  for (const auto& [k, block] : Blocks(SplitPage(text).front_matter)) {
    if (k == key)
      return Unquote(block.substr(block.find(':') + 1, block.find('\n') - k.size() - 1));
  }
  return "";
}

std::string MergeCard(const std::string& existing, const OwnedKeys& keys,
                      const std::string& generated) {
  Page page = SplitPage(existing);
  std::string license =
      keys.license.empty() ? FrontMatterScalar(existing, "license") : keys.license;
  std::string fm;
  if (!keys.base_model.empty()) fm += "base_model: " + Quote(keys.base_model) + "\n";
  fm += "base_model_relation: quantized\nlibrary_name: vllm\npipeline_tag: text-generation\n";
  if (!license.empty()) fm += "license: " + Quote(license) + "\n";
  fm += "tags:\n";
  for (const std::string& tag : Tags(keys)) fm += "- " + Quote(tag) + "\n";
  const std::set<std::string> owned = {
      "base_model", "base_model_relation", "library_name", "pipeline_tag", "license", "tags"};
  for (const auto& [key, block] : Blocks(page.front_matter)) {
    if (!owned.count(key)) fm += block;
  }
  std::string block = std::string(kGeneratedBegin) + "\n" + generated + kGeneratedEnd;
  std::string body = page.body;
  size_t begin = body.find(kGeneratedBegin), end = body.find(kGeneratedEnd);
  if (begin != std::string::npos && end != std::string::npos && end > begin) {
    body = body.substr(0, begin) + block + body.substr(end + std::string(kGeneratedEnd).size());
  } else {
    while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) body.pop_back();
    while (!body.empty() && body.front() == '\n') body.erase(0, 1);
    body = body.empty() ? block + "\n" : body + "\n\n" + block + "\n";
  }
  return kFence + fm + kFence + "\n" + body;
}

}  // namespace spk::card
