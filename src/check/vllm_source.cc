#include "check/vllm_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "check/check_rules.h"
#include "check/finding_codes.h"
#include "check/vllm_code.h"
#include "check/vllm_rules.h"

namespace spk {
namespace {

constexpr int kContext = 3;

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Start of the dotted expression ("self.quant_config", "a") that ends just before `pos`.
size_t ExpressionStart(const std::string& line, size_t pos) {
  size_t start = pos;
  while (start > 0 && (IsIdentChar(line[start - 1]) || line[start - 1] == '.')) --start;
  return start;
}

// Where a helper can go: after the last top-level import (and its parenthesized continuation)
// that precedes the first top-level def, class or decorator.
size_t HelperInsertLine(const std::vector<std::string>& lines) {
  size_t insert = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.starts_with("def ") || l.starts_with("class ") || l.starts_with("@")) break;
    if (l.starts_with("import ") || l.starts_with("from ")) {
      size_t end = i;
      if (l.find('(') != std::string::npos && l.find(')') == std::string::npos) {
        while (end + 1 < lines.size() && lines[end].find(')') == std::string::npos) ++end;
      }
      insert = end + 1;
      i = end;
    }
  }
  return insert;
}

const char* const kDenseWeightHelper[] = {
    "",
    "",
    "def _spk_dense_weight(layer):",
    "    \"\"\"Dense weight of a Linear layer, also for a compressed-tensors pack-quantized one",
    "    (weight_packed, weight_scale, weight_zero_point; before Marlin repacking). Added by",
    "    `sparkulator check --vllm`: DFlash reads qkv_proj.weight directly (vllm#51581).\"\"\"",
    "    weight = getattr(layer, \"weight\", None)",
    "    if weight is not None:",
    "        return weight",
    "    packed = layer.weight_packed.data",
    "    scale = layer.weight_scale.data",
    "    in_features = layer.input_size_per_partition",
    "    bits = 32 * packed.shape[1] // in_features",
    "    mask = (1 << bits) - 1",
    "    shifts = torch.arange(0, 32, bits, dtype=torch.int32, device=packed.device)",
    "    values = (packed.unsqueeze(-1) >> shifts) & mask",
    "    values = values.reshape(packed.shape[0], -1)[:, :in_features] - (1 << (bits - 1))",
    "    group = in_features // scale.shape[1]",
    "    zero = getattr(layer, \"weight_zero_point\", None)",
    "    if zero is not None:",
    "        zp = (zero.data.unsqueeze(1) >> shifts.view(1, -1, 1)) & mask",
    "        zp = zp.reshape(-1, zero.shape[1])[: packed.shape[0]] - (1 << (bits - 1))",
    "        values = values - zp.repeat_interleave(group, dim=1)",
    "    return values.to(scale.dtype) * scale.repeat_interleave(group, dim=1)",
};

struct Patched {
  std::vector<std::string> lines;
  std::vector<size_t> changed;  // 1-based line numbers in the original
};

// Rewrites "<expr>.qkv_proj.weight[" to "_spk_dense_weight(<expr>.qkv_proj)[" and adds the helper.
std::optional<Patched> PatchContextKv(const std::vector<std::string>& lines) {
  constexpr std::string_view kNeedle = ".qkv_proj.weight[";
  Patched p{lines, {}};
  for (size_t i = 0; i < p.lines.size(); ++i) {
    std::string& l = p.lines[i];
    size_t pos = 0;
    bool changed = false;
    while ((pos = l.find(kNeedle, pos)) != std::string::npos) {
      size_t start = ExpressionStart(l, pos);
      std::string expr = l.substr(start, pos - start);
      std::string repl = fmt::format("_spk_dense_weight({}.qkv_proj)[", expr);
      l.replace(start, pos + kNeedle.size() - start, repl);
      pos = start + repl.size();
      changed = true;
    }
    if (changed) p.changed.push_back(i + 1);
  }
  if (p.changed.empty()) return std::nullopt;
  size_t at = HelperInsertLine(p.lines);
  p.lines.insert(p.lines.begin() + static_cast<std::ptrdiff_t>(at), std::begin(kDenseWeightHelper),
                 std::end(kDenseWeightHelper));
  return p;
}

// Rewrites "<expr>.get_cache_scale(" to "getattr(<expr>, \"get_cache_scale\", lambda _n: None)(".
std::optional<Patched> PatchGetCacheScale(const std::vector<std::string>& lines) {
  constexpr std::string_view kNeedle = ".get_cache_scale(";
  Patched p{lines, {}};
  for (size_t i = 0; i < p.lines.size(); ++i) {
    std::string& l = p.lines[i];
    size_t pos = l.find(kNeedle);
    if (pos == std::string::npos || l.find("getattr(") != std::string::npos) continue;
    size_t start = ExpressionStart(l, pos);
    std::string expr = l.substr(start, pos - start);
    if (expr.empty()) continue;
    l.replace(start, pos + kNeedle.size() - start,
              fmt::format("getattr({}, \"get_cache_scale\", lambda _name: None)(", expr));
    p.changed.push_back(i + 1);
  }
  if (p.changed.empty()) return std::nullopt;
  return p;
}

}  // namespace

std::string UnifiedDiff(const std::string& path, const std::vector<std::string>& before,
                        const std::vector<std::string>& after) {
  // Longest common subsequence on the lines between the common prefix and suffix.
  size_t prefix = 0;
  while (prefix < before.size() && prefix < after.size() && before[prefix] == after[prefix]) {
    ++prefix;
  }
  size_t suffix = 0;
  while (suffix < before.size() - prefix && suffix < after.size() - prefix &&
         before[before.size() - 1 - suffix] == after[after.size() - 1 - suffix]) {
    ++suffix;
  }
  size_t n = before.size() - prefix - suffix, m = after.size() - prefix - suffix;
  if (n == 0 && m == 0) return "";
  std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = before[prefix + i] == after[prefix + j] ? lcs[i + 1][j + 1] + 1
                                                          : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  struct Op {
    char kind;  // ' ', '-', '+'
    const std::string* line;
  };
  std::vector<Op> ops;
  for (size_t i = 0; i < prefix; ++i) ops.push_back({' ', &before[i]});
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && before[prefix + i] == after[prefix + j]) {
      ops.push_back({' ', &before[prefix + i]});
      ++i, ++j;
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      ops.push_back({'-', &before[prefix + i++]});  // deletions before insertions, as diff -u
    } else {
      ops.push_back({'+', &after[prefix + j++]});
    }
  }
  for (size_t k = before.size() - suffix; k < before.size(); ++k) ops.push_back({' ', &before[k]});

  std::string out = fmt::format("--- a/{}\n+++ b/{}\n", path, path);
  size_t k = 0;
  while (k < ops.size()) {
    while (k < ops.size() && ops[k].kind == ' ') ++k;
    if (k == ops.size()) break;
    size_t begin = k >= kContext ? k - kContext : 0;
    // Extend the hunk while the next change is within 2 * kContext unchanged lines.
    size_t end = k;
    while (true) {
      while (end < ops.size() && ops[end].kind != ' ') ++end;
      size_t next = end;
      while (next < ops.size() && ops[next].kind == ' ') ++next;
      if (next < ops.size() && next - end <= 2 * kContext) {
        end = next;
        continue;
      }
      end = std::min(ops.size(), end + kContext);
      break;
    }
    // Line numbers of the hunk's first line in each file.
    size_t old_line = 1, new_line = 1;
    for (size_t q = 0; q < begin; ++q) {
      old_line += ops[q].kind != '+';
      new_line += ops[q].kind != '-';
    }
    size_t old_count = 0, new_count = 0;
    std::string body;
    for (size_t q = begin; q < end; ++q) {
      old_count += ops[q].kind != '+';
      new_count += ops[q].kind != '-';
      body += ops[q].kind;
      body += *ops[q].line;
      body += '\n';
    }
    out += fmt::format("@@ -{},{} +{},{} @@\n", old_count ? old_line : old_line - 1, old_count,
                       new_count ? new_line : new_line - 1, new_count);
    out += body;
    k = end;
  }
  return out;
}

namespace {

// Every .py file under `dir`, recursively, with its path relative to the vLLM tree (`rel`), in
// name order.
Status CollectPythonFiles(FileSystem* fs, const std::string& dir, const std::string& rel,
                          std::vector<std::pair<std::string, std::string>>* out) {
  SPK_ASSIGN_OR_RETURN(std::vector<std::string> names, fs->ListDirectory(dir));
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    if (fs->KindOf(path) == FileKind::kDirectory) {
      SPK_RETURN_IF_ERROR(CollectPythonFiles(fs, path, rel + "/" + name, out));
    } else if (name.ends_with(".py")) {
      out->emplace_back(path, rel + "/" + name);
    }
  }
  return Status::Ok();
}

}  // namespace

// Scanning (which files and lines vLLM runs unguarded) is kept apart from the patch text above.
// Only reads outside the rule's guard are reported: qwen3_dflash.py 0.32 reads qkv_proj.weight
// only when every qkv_proj is unquantized and otherwise projects through the quant method. The
// DFlash model files of vllm/model_executor/models and every file of vllm/models/** (0.33 moved
// drafts there: beam/nvidia/dflash2.py, muse_spark/common/dspark.py) are read.
Result<std::vector<Finding>> InspectVllmSource(FileSystem* fs, const std::string& dir) {
  SPK_ASSIGN_OR_RETURN(std::string models, VllmModelsDir(fs, dir));
  SPK_ASSIGN_OR_RETURN(std::vector<std::string> names, fs->ListDirectory(models));
  std::sort(names.begin(), names.end());
  std::vector<std::pair<std::string, std::string>> files;  // path, path in the vLLM tree
  for (const std::string& name : names) {
    if (name.ends_with(".py") && name.find("dflash") != std::string::npos) {
      files.emplace_back(models + "/" + name, "vllm/model_executor/models/" + name);
    }
  }
  const std::string vllm_root =
      models.substr(0, models.size() - std::string("/model_executor/models").size());
  if (fs->KindOf(vllm_root + "/models") == FileKind::kDirectory) {
    SPK_RETURN_IF_ERROR(CollectPythonFiles(fs, vllm_root + "/models", "vllm/models", &files));
  }
  const VllmRule& context_kv = VllmRuleById("qwen3-dflash-quantized-qkv");
  // The findings go through the rules table's sink, entered as the vllm-tree-scan row, so that
  // the codes this scan raises are the ones its row's finding codes name (check/check_rules.h).
  std::vector<Finding> findings;
  check_internal::FindingSink sink(&findings);
  sink.Enter(check_internal::RuleNamed("vllm-tree-scan"));
  for (const auto& [path, rel] : files) {
    SPK_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path));
    std::vector<std::string> lines = SplitSourceLines(text);
    std::vector<size_t> unguarded = UnguardedLines(lines, context_kv.needle, context_kv.guard);
    if (!unguarded.empty()) {
      const std::string message = fmt::format(
          "line(s) {} read qkv_proj.weight to build the context K/V with no {} guard; a "
          "quantized draft's qkv_proj has weight_packed instead, so vLLM fails with "
          "\"'QKVParallelLinear' object has no attribute 'weight'\" (vllm#51581)",
          fmt::join(unguarded, ", "), context_kv.guard);
      if (auto p = PatchContextKv(lines)) {
        sink.Add(FindingCode::kVllmDflashContextKv, "", rel, message,
                 UnifiedDiff(rel, lines, p->lines));
        lines = p->lines;
      } else {
        sink.Add(FindingCode::kVllmDflashContextKv, "", rel, message,
                 "no patch for this file's shape: keep the draft's q/k/v dense "
                 "(sparkulator quantize does)");
      }
    }
    if (rel.ends_with("/laguna_dflash.py")) {
      // Against the text after the first patch, so that the two diffs apply one after the other.
      if (auto p = PatchGetCacheScale(lines)) {
        sink.Add(FindingCode::kVllmLagunaGetCacheScale, "", rel,
                 fmt::format("line(s) {} call quant_config.get_cache_scale(), which only FP8 "
                             "quantization configs define; a compressed-tensors draft fails with "
                             "AttributeError",
                             fmt::join(p->changed, ", ")),
                 UnifiedDiff(rel, lines, p->lines));
      }
    }
  }
  return findings;
}

}  // namespace spk
