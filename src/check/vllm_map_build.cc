#include "check/vllm_map_build.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "base/embedded_file.h"
#include "base/json_at.h"
#include "io/subprocess.h"

namespace spk {

// tools/vllm_module_map/*.py as the build embedded them (cmake/embed_files.cmake).
const std::vector<EmbeddedFile>& EmbeddedMapGenerator();

namespace {

constexpr size_t kStderrLines = 12;

// The folder whose `vllm` package is DIR's (site-packages, a source tree), for PYTHONPATH.
std::string PackageRoot(FileSystem* fs, const std::string& dir) {
  if (fs->KindOf(JoinPath(JoinPath(dir, "vllm"), "__init__.py")) == FileKind::kFile) return dir;
  if (Basename(dir) == "vllm" && fs->KindOf(JoinPath(dir, "__init__.py")) == FileKind::kFile) {
    return Dirname(dir);
  }
  return dir;
}

bool HasCompiledExtension(FileSystem* fs, const std::string& root) {
  auto names = fs->ListDirectory(JoinPath(root, "vllm"));
  if (!names.ok()) return false;
  for (const std::string& n : *names) {
    if (n.starts_with("_C") && n.find(".so") != std::string::npos) return true;
  }
  return false;
}

// <venv>/bin/python for DIR = <venv>/lib/pythonX.Y/site-packages, else "".
std::string VenvPython(FileSystem* fs, const std::string& root) {
  if (Basename(root) != "site-packages") return "";
  const std::string venv = Dirname(Dirname(Dirname(root)));
  for (const char* name : {"bin/python", "bin/python3"}) {
    std::string p = JoinPath(venv, name);
    if (fs->KindOf(p) == FileKind::kFile) return p;
  }
  return "";
}

// The last `count` lines of `text`, without the newlines that end it.
std::string LastLines(const std::string& text, size_t count) {
  size_t end = text.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  size_t start = end + 1;
  for (size_t lines = 0; lines < count && start > 0; ++lines) {
    size_t newline = text.rfind('\n', start - 1);
    start = newline == std::string::npos ? 0 : newline;
    if (newline == std::string::npos) break;
  }
  if (start < text.size() && text[start] == '\n') ++start;
  return text.substr(start, end + 1 - start);
}

Result<std::string> WriteGenerator(FileSystem* fs) {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = JoinPath(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                   fmt::format("spk-vllm-map-{}-{}", ::getpid(), counter++));
  SPK_RETURN_IF_ERROR(fs->CreateDirectories(JoinPath(dir, "tools/vllm_module_map")));
  for (const EmbeddedFile& f : EmbeddedMapGenerator()) {
    Status written = fs->WriteFile(JoinPath(dir, std::string(f.name)), f.text);
    if (!written.ok()) {
      (void)fs->RemoveAll(dir);
      return written;
    }
  }
  return dir;
}

}  // namespace

Result<TreeMap> BuildModuleMapFromTree(FileSystem* fs, const TreeMapRequest& request) {
  const std::string root = PackageRoot(fs, request.vllm_dir);
  const bool compiled = HasCompiledExtension(fs, root);
  std::string python = request.python;
  if (python.empty()) python = compiled ? VenvPython(fs, root) : "";
  if (python.empty()) python = "python3";
  SPK_ASSIGN_OR_RETURN(std::string generator_dir, WriteGenerator(fs));
  std::vector<std::string> argv = {python,
                                   JoinPath(generator_dir, "tools/vllm_module_map/generate.py")};
  // Every format's verdicts (the map's scheme_verdicts): --print builds each in turn.
  argv.push_back("--print");
  if (!compiled) {
    argv.insert(argv.end(), {"--tree", root});  // the generator fakes its default capability
  }
  for (const std::string& a : request.architectures) {
    argv.push_back("--only");
    argv.push_back(a);
  }
  const char* old_path = std::getenv("PYTHONPATH");
  std::string pythonpath =
      root +
      (old_path != nullptr && *old_path != '\0' ? ":" + std::string(old_path) : std::string());
  auto run = RunProcess(argv, {{"PYTHONPATH", pythonpath}}, request.timeout);
  (void)fs->RemoveAll(generator_dir);
  SPK_RETURN_IF_ERROR(run.status());
  const std::string command =
      fmt::format("{} generate.py {}", python, compiled ? "--print" : "(faked CUDA)");
  if (!run->ok()) {
    return Status::Unavailable(fmt::format(
        "cannot build vLLM's module map from {}: {} {}{}{}", request.vllm_dir, command,
        run->description, run->err.empty() ? "" : ":\n", LastLines(run->err, kStderrLines)));
  }
  SPK_ASSIGN_OR_RETURN(ModuleMap map,
                       ParseModuleMap(run->out, fmt::format("the map {} printed", command)));
  // The platform the generator faked, as it recorded it in the map: the capability is written in
  // fake_cuda.py alone.
  std::string faked;
  const nlohmann::json printed = nlohmann::json::parse(run->out, nullptr, false);
  if (const nlohmann::json& f = FieldOrNull(printed, "faked_platform"); f.is_string()) {
    faked = f.get<std::string>();
  }
  TreeMap out{std::move(map),
              compiled || faked.empty() ? python : fmt::format("{} ({} faked)", python, faked),
              run->out};
  return out;
}

std::vector<std::string> ArchitecturesToMap(const ModelConfig& config) {
  std::vector<std::string> out = config.architectures;
  auto add = [&out](std::string_view name) {
    if (!name.empty() && std::find(out.begin(), out.end(), name) == out.end()) {
      out.emplace_back(name);
    }
  };
  const ModuleMap& newest = ModuleMaps().back();
  if (const MappedArchitecture* mtp = FindMtpArchitecture(newest, config)) add(mtp->name);
  if (const SpeculatorsFormat* format = FindSpeculatorsFormat(newest, config)) {
    add(SpeculatorsArchitecture(*format, config));
  }
  return out;
}

}  // namespace spk
