#include "check/vllm_code.h"

#include <fmt/format.h>

#include "base/lines.h"

namespace spk {
namespace {

size_t Indent(const std::string& line) {
  size_t n = 0;
  while (n < line.size() && line[n] == ' ') ++n;
  return n;
}

// Blank lines and comments take no part in the block structure.
bool IsCode(const std::string& line) {
  size_t i = Indent(line);
  return i < line.size() && line[i] != '#';
}

std::string_view Stripped(const std::string& line) {
  return std::string_view(line).substr(Indent(line));
}

bool StartsWithWord(std::string_view s, std::string_view word) {
  return s.starts_with(word) && (s.size() == word.size() || s[word.size()] == ' ' ||
                                 s[word.size()] == '(' || s[word.size()] == ':');
}

bool IsBlockHeader(std::string_view s) {
  for (std::string_view kw : {"if", "elif", "else", "for", "while", "with", "try", "except",
                              "finally", "def", "class", "async"}) {
    if (StartsWithWord(s, kw)) return true;
  }
  return false;
}

// The first line of the statement that ends at `end` (a line opening with a closing bracket
// continues a statement begun above at the same indent), or `end` itself.
size_t StatementStart(const std::vector<std::string>& lines, size_t end) {
  std::string_view s = Stripped(lines[end]);
  if (s.empty() || (s[0] != ')' && s[0] != ']' && s[0] != '}')) return end;
  size_t indent = Indent(lines[end]);
  for (size_t k = end; k-- > 0;) {
    if (!IsCode(lines[k])) continue;
    if (Indent(lines[k]) < indent) return end;
    if (Indent(lines[k]) == indent && IsBlockHeader(Stripped(lines[k]))) return k;
  }
  return end;
}

bool GuardsWith(const std::vector<std::string>& lines, size_t start, size_t end,
                std::string_view guard) {
  std::string_view first = Stripped(lines[start]);
  if (!StartsWithWord(first, "if") && !StartsWithWord(first, "elif")) return false;
  std::string header;
  for (size_t k = start; k <= end; ++k) header += std::string(Stripped(lines[k])) + " ";
  size_t at = header.find(guard);
  if (at == std::string::npos) return false;
  // "if not isinstance(..., Guard)" selects the other branch.
  return header.substr(0, at).find("not ") == std::string::npos;
}

bool IsGuarded(const std::vector<std::string>& lines, size_t use, std::string_view guard) {
  size_t indent = Indent(lines[use]);
  for (size_t j = use; j-- > 0 && indent > 0;) {
    if (!IsCode(lines[j]) || Indent(lines[j]) >= indent) continue;
    size_t start = StatementStart(lines, j);
    std::string_view head = Stripped(lines[start]);
    if (StartsWithWord(head, "def") || StartsWithWord(head, "class") ||
        StartsWithWord(head, "async")) {
      return false;
    }
    if (GuardsWith(lines, start, j, guard)) return true;
    indent = Indent(lines[start]);
    j = start;
  }
  return false;
}

}  // namespace

Result<std::string> VllmModelsDir(FileSystem* fs, const std::string& dir) {
  for (const std::string& candidate :
       {dir + "/vllm/model_executor/models", dir + "/model_executor/models"}) {
    if (fs->IsDirectory(candidate)) return candidate;
  }
  return Status::NotFound(fmt::format(
      "{}: no vllm/model_executor/models folder; pass the folder that holds the installed "
      "`vllm` package (python -c 'import vllm, os; print(os.path.dirname(vllm.__path__[0]))') "
      "or a vLLM source checkout",
      dir));
}

std::vector<std::string> SplitSourceLines(const std::string& text) {
  std::vector<std::string> lines;
  for (std::string_view line : SplitLines(text)) lines.emplace_back(line);
  return lines;
}

Result<std::optional<std::vector<std::string>>> ReadVllmModelFile(FileSystem* fs,
                                                                  const std::string& dir,
                                                                  std::string_view name) {
  SPK_ASSIGN_OR_RETURN(std::string models, VllmModelsDir(fs, dir));
  std::string path = models + "/" + std::string(name);
  if (!fs->FileExists(path)) return std::optional<std::vector<std::string>>();
  SPK_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path));
  return std::optional<std::vector<std::string>>(SplitSourceLines(text));
}

std::vector<size_t> LinesContaining(const std::vector<std::string>& lines,
                                    std::string_view needle) {
  std::vector<size_t> found;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(needle) != std::string::npos) found.push_back(i + 1);
  }
  return found;
}

std::vector<size_t> UnguardedLines(const std::vector<std::string>& lines, std::string_view needle,
                                   std::string_view guard) {
  std::vector<size_t> found;
  for (size_t line : LinesContaining(lines, needle)) {
    if (!IsGuarded(lines, line - 1, guard)) found.push_back(line);
  }
  return found;
}

}  // namespace spk
