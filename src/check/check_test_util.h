// Test-only helpers of the check tests (not part of spk_check): checkpoints written by `sparkulator
// example` and `quantize`, config.json and tensor edits that plant one fault, and the findings of a
// check by code. Failures are gtest failures in the calling test.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "check/check.h"
#include "io/fs_util.h"
#include "io/test_util.h"
#include "plan/example.h"
#include "quantize/quantize.h"
#include "safetensors/reader.h"
#include "safetensors/writer.h"

namespace spk::check_test {

using Json = nlohmann::ordered_json;

inline std::string Example(const spk::testing::ScopedTempDir& dir, const std::string& name,
                           const std::string& family, int64_t target_layers = 0) {
  ExampleOptions o;
  o.family = family;
  o.dir = dir / name;
  o.target_layers = target_layers;
  Status s = WriteExampleCheckpoint(o, FileSystem::Default());
  EXPECT_TRUE(s.ok()) << s.message();
  return o.dir;
}

// `sparkulator quantize SRC DST` (W4A16 RTN); `preset` none quantizes DFlash q/k/v too.
inline std::string Quantize(const std::string& src, const std::string& dst, Preset preset,
                            std::vector<std::string> ignore = {}) {
  QuantizeOptions o;
  o.source = src;
  o.destination = dst;
  o.plan.preset = preset;
  o.plan.ignore = std::move(ignore);
  o.durability = Durability::kPageCache;
  auto r = QuantizeCheckpoint(RunContext{.threads = 1}, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return dst;
}

inline void EditConfig(const std::string& dir, const std::function<void(Json&)>& edit) {
  auto text = ReadWholeFile(dir + "/config.json");
  ASSERT_TRUE(text.ok());
  Json j = Json::parse(*text);
  edit(j);
  ASSERT_TRUE(WriteWholeFile(dir + "/config.json", j.dump(2)).ok());
}

inline CheckReport Check(const std::string& dir, CheckOptions o = {}) {
  o.checkpoint = dir;
  auto r = CheckCheckpoint(RunContext{}, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : CheckReport{};
}

inline std::vector<const Finding*> WithCode(const CheckReport& r, std::string_view code) {
  std::vector<const Finding*> out;
  for (const Finding& f : r.findings) {
    if (f.code == code) out.push_back(&f);
  }
  return out;
}
// The pointers WithCode returns point into the report: a temporary report would leave them
// dangling, so that overload does not exist (use HasCode, or keep the report in a variable).
std::vector<const Finding*> WithCode(CheckReport&& r, std::string_view code) = delete;

inline bool HasCode(const CheckReport& r, std::string_view code) {
  for (const Finding& f : r.findings) {
    if (f.code == code) return true;
  }
  return false;
}

// Expects the codes of the report's error findings to be exactly `codes` (a failing report is not
// enough: a test that plants one fault fails when the check errs on something else as well).
inline void ExpectErrorCodes(const CheckReport& r, const std::set<std::string>& codes,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  std::set<std::string> errors;
  for (const Finding& f : r.findings) {
    if (f.severity == Severity::kError) errors.insert(f.code);
  }
  if (errors == codes && !r.ok()) return;
  std::string want;
  for (const std::string& c : codes) want += " " + c;
  ADD_FAILURE_AT(file, line) << "expected error findings:" << want << "\n" << RenderCheckReport(r);
}

// One stored tensor: its name, dtype and shape, and its bytes.
struct TensorBytes {
  TensorSpec spec;
  std::vector<uint8_t> bytes;
};
using Tensors = std::map<std::string, TensorBytes>;

inline Tensors ReadShard(const std::string& path) {
  Tensors out;
  auto reader = SafetensorsReader::Open(FileSystem::Default(), path);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok()) return out;
  for (const TensorEntry& t : reader->header().tensors) {
    TensorBytes s{{t.name, t.dtype, t.shape}, std::vector<uint8_t>(t.nbytes())};
    EXPECT_TRUE(reader->ReadTensor(t, s.bytes).ok()) << t.name;
    out[t.name] = std::move(s);
  }
  return out;
}

// Writes `tensors` with the project's writer (safetensors layout and header).
inline void WriteShard(const std::string& path, const Tensors& tensors) {
  std::vector<TensorSpec> specs;
  for (const auto& [name, t] : tensors) specs.push_back(t.spec);
  auto layout = SafetensorsLayout::Plan(std::move(specs), {{"format", "pt"}});
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  auto file = FileSystem::Default()->CreateForWrite(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_TRUE(WriteSafetensorsHeader(**file, *layout).ok());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE((*file)->WriteAt(*layout->AbsoluteOffset(name), t.bytes).ok()) << name;
  }
  ASSERT_TRUE((*file)->Close().ok());
}

// Rewrites one shard of `dir` after `edit` changed its tensors.
inline void EditTensors(const std::string& dir, const std::function<void(Tensors&)>& edit,
                        const std::string& file = "model.safetensors") {
  Tensors tensors = ReadShard(dir + "/" + file);
  edit(tensors);
  WriteShard(dir + "/" + file, tensors);
}

}  // namespace spk::check_test
