#include "vllm/module_pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/strings.h"
#include "vllm/vllm_module_map.h"

namespace spk {

struct ModulePattern::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

constexpr std::string_view kRegexPrefix = "re:";

// Python's \Z (absolute end) is PCRE2's \z; PCRE2's \Z would also accept a final newline.
std::string TranslatePythonRegex(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size());
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      out += '\\';
      out += pattern[i + 1] == 'Z' ? 'z' : pattern[i + 1];
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace

Result<ModulePattern> ModulePattern::Parse(std::string_view entry) {
  ModulePattern pattern;
  pattern.text_ = std::string(entry);
  if (!entry.starts_with(kRegexPrefix)) return pattern;
  std::string regex = TranslatePythonRegex(entry.substr(kRegexPrefix.size()));
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.data()), regex.size(),
                    PCRE2_ANCHORED | PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    return Status::InvalidInput(
        fmt::format("pattern '{}' is not a valid regular expression: {} at "
                    "offset {}",
                    entry, reinterpret_cast<const char*>(message), error_offset));
  }
  auto holder = std::make_shared<Code>();
  holder->code = code;
  pattern.code_ = std::move(holder);
  return pattern;
}

bool ModulePattern::Matches(std::string_view module_name) const {
  if (!code_) return module_name == text_;
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(module_name.data()),
                       module_name.size(), 0, 0, data, nullptr);
  pcre2_match_data_free(data);
  return rc >= 0;
}

Result<std::vector<ModulePattern>> ParsePatterns(const std::vector<std::string>& entries,
                                                 std::string_view what) {
  std::vector<ModulePattern> patterns;
  for (size_t i = 0; i < entries.size(); ++i) {
    auto parsed = ModulePattern::Parse(entries[i]);
    if (!parsed.ok()) return parsed.status().WithContext(fmt::format("{} entry {}", what, i));
    patterns.push_back(std::move(parsed).value());
  }
  return patterns;
}

bool AnyMatches(const std::vector<ModulePattern>& patterns, std::string_view module_name) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const ModulePattern& p) { return p.Matches(module_name); });
}

const FusedMapping& StandardFusedMapping() {
  static const FusedMapping* mapping = [] {
    auto* merged = new FusedMapping;
    const ModuleMap& newest = ModuleMaps().back();
    for (const auto& [name, arch] : newest.architectures) {
      if (arch.is_draft) continue;
      for (const auto& [fused, shards] : arch.packed_modules_mapping)
        merged->emplace(fused, shards);
    }
    if (!merged->contains("qkv_proj") || !merged->contains("gate_up_proj")) {
      std::fprintf(stderr,
                   "internal error: vLLM %s's module map holds no target's "
                   "packed_modules_mapping for qkv_proj and gate_up_proj\n",
                   newest.release.c_str());
      std::abort();
    }
    return merged;
  }();
  return *mapping;
}

std::string EscapeRegex(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view(".^$*+?()[]{}|\\").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

bool IsQkvLeaf(std::string_view leaf) {
  const std::vector<std::string>& shards = StandardFusedMapping().at("qkv_proj");
  return leaf == "qkv_proj" || std::find(shards.begin(), shards.end(), leaf) != shards.end();
}

bool IsAttentionQkv(std::string_view module) {
  const size_t leaf_at = module.rfind('.');
  if (leaf_at == std::string_view::npos) return false;
  const std::string_view parent = module.substr(0, leaf_at);
  return (parent == "self_attn" || parent.ends_with(".self_attn")) &&
         IsQkvLeaf(module.substr(leaf_at + 1));
}

namespace {

bool ListedLiterally(const std::vector<ModulePattern>& ignore, std::string_view name) {
  return std::any_of(ignore.begin(), ignore.end(),
                     [&](const ModulePattern& p) { return p.text() == name; });
}

}  // namespace

IgnoreDecision DecideIgnore(std::string_view layer_name, const std::vector<ModulePattern>& ignore,
                            const FusedMapping& mapping) {
  size_t dot = layer_name.rfind('.');
  std::string_view leaf = dot == std::string_view::npos ? layer_name : layer_name.substr(dot + 1);
  auto fused = mapping.find(std::string(leaf));
  IgnoreDecision decision;
  if (fused == mapping.end() || ListedLiterally(ignore, layer_name)) {
    decision.ignored = AnyMatches(ignore, layer_name);
    return decision;
  }
  bool first = true;
  for (const std::string& shard_leaf : fused->second) {
    bool shard_ignored = AnyMatches(ignore, ReplaceAll(layer_name, leaf, shard_leaf));
    if (first) {
      decision.ignored = shard_ignored;
      first = false;
    } else if (shard_ignored != decision.ignored) {
      decision.shards_disagree = true;
    }
  }
  return decision;
}

}  // namespace spk
