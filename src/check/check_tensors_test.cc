// CheckCheckpoint on one tensor-level or file-level fault each: a clean `example` + `quantize`
// checkpoint, one tensor removed, reshaped, added or overwritten with the project's safetensors
// writer (or the shard index edited), and the finding's code, module (or file) and severity.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "check/check.h"
#include "check/check_test_util.h"
#include "safetensors/index.h"

namespace spk {
namespace {

using namespace check_test;  // NOLINT: the test helpers

constexpr const char* kModule = "model.layers.0.mlp.down_proj";

// A quantized LLM example checkpoint (one shard) that checks clean, copied to `name`.
class CheckTensors : public ::testing::Test {
 protected:
  void SetUp() override {
    clean_ = Quantize(Example(dir_, "src", "llm"), dir_ / "q", Preset::kAuto);
    ASSERT_TRUE(Check(clean_).findings.empty()) << RenderCheckReport(Check(clean_));
  }
  std::string Copy(const std::string& name) {
    std::string d = dir_ / name;
    std::filesystem::copy(clean_, d, std::filesystem::copy_options::recursive);
    return d;
  }
  // Plants `edit` in a copy and expects `code` on `module` (or on `file` when module is "").
  void Expect(const std::string& name, const std::function<void(Tensors&)>& edit,
              std::string_view code, const std::string& module,
              Severity severity = Severity::kError) {
    std::string d = Copy(name);
    EditTensors(d, edit);
    CheckReport r = Check(d);
    auto found = WithCode(r, code);
    ASSERT_EQ(found.size(), 1u) << name << ":\n" << RenderCheckReport(r);
    EXPECT_EQ(found[0]->module, module) << name;
    EXPECT_EQ(found[0]->severity, severity) << name;
    SCOPED_TRACE(name);
    ExpectErrorCodes(r, {std::string(code)});  // the planted fault and nothing else
  }

  spk::testing::ScopedTempDir dir_;
  std::string clean_;
};

std::string T(std::string_view suffix) { return std::string(kModule) + std::string(suffix); }

TEST_F(CheckTensors, MissingTensorsOfTheFormat) {
  Expect(
      "scale", [](Tensors& t) { t.erase(T(".weight_scale")); }, "missing-weight-scale", kModule);
  Expect(
      "shape", [](Tensors& t) { t.erase(T(".weight_shape")); }, "missing-weight-shape", kModule);
  Expect(
      "packed", [](Tensors& t) { t.erase(T(".weight_packed")); }, "missing-weight-packed", kModule);
}

TEST_F(CheckTensors, WrongShapesAndExtraTensors) {
  Expect(
      "packed_shape",
      [](Tensors& t) {
        TensorBytes& p = t[T(".weight_packed")];
        p.spec.shape[1] /= 2;
        p.bytes.resize(p.bytes.size() / 2);
      },
      "weight-packed-shape", kModule);
  Expect(
      "scale_shape",
      [](Tensors& t) {
        TensorBytes& s = t[T(".weight_scale")];
        ASSERT_GT(s.spec.shape[1], 1);
        s.bytes.resize(s.bytes.size() / s.spec.shape[1]);
        s.spec.shape[1] = 1;
      },
      "weight-scale-shape", kModule);
  Expect(
      "zero_point",
      [](Tensors& t) {
        const TensorBytes& s = t[T(".weight_scale")];
        int64_t rows = s.spec.shape[0] / 8, groups = s.spec.shape[1];
        t[T(".weight_zero_point")] = {{T(".weight_zero_point"), DType::kI32, {rows, groups}},
                                      std::vector<uint8_t>(rows * groups * 4)};
      },
      "zero-point-in-symmetric", kModule);
  Expect(
      "weight_and_packed",
      [](Tensors& t) {
        const TensorBytes& p = t[T(".weight_packed")];
        int64_t out = p.spec.shape[0], in = p.spec.shape[1] * 8;  // eight int4 per int32
        t[T(".weight")] = {{T(".weight"), DType::kBF16, {out, in}},
                           std::vector<uint8_t>(out * in * 2)};
      },
      "weight-and-packed", kModule);
}

// Overwrites element 0 of the module's weight_scale with the bits of `value` (bf16 or f32).
std::function<void(Tensors&)> SetFirstScale(float value) {
  return [value](Tensors& t) {
    TensorBytes& s = t[T(".weight_scale")];
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    if (s.spec.dtype == DType::kF32) {
      std::memcpy(s.bytes.data(), &bits, 4);
    } else {
      ASSERT_EQ(s.spec.dtype, DType::kBF16);
      uint16_t high = static_cast<uint16_t>(bits >> 16);
      std::memcpy(s.bytes.data(), &high, 2);
    }
  };
}

TEST_F(CheckTensors, BadScaleValues) {
  Expect("nan", SetFirstScale(std::numeric_limits<float>::quiet_NaN()), "scale-not-finite",
         kModule);
  Expect("zero", SetFirstScale(0.0f), "scale-zero", kModule);
  Expect("negative", SetFirstScale(-0.5f), "scale-negative", kModule);
}

// The clean checkpoint split into two shards with an index; `edit` changes the index.
std::string TwoShards(const std::string& d, const std::function<void(ShardIndex&)>& edit) {
  Tensors all = ReadShard(d + "/model.safetensors");
  std::filesystem::remove(d + "/model.safetensors");
  Tensors first, second;
  ShardIndex index;
  size_t i = 0;
  for (auto& [name, t] : all) {
    bool in_first = i++ < all.size() / 2;
    index.weight_map[name] = in_first ? "a.safetensors" : "b.safetensors";
    (in_first ? first : second)[name] = std::move(t);
  }
  WriteShard(d + "/a.safetensors", first);
  WriteShard(d + "/b.safetensors", second);
  edit(index);
  EXPECT_TRUE(WriteWholeFile(d + "/model.safetensors.index.json", SerializeShardIndex(index)).ok());
  return d;
}

const Finding* Only(const CheckReport& r, std::string_view code) {
  auto found = WithCode(r, code);
  EXPECT_EQ(found.size(), 1u) << code << ":\n" << RenderCheckReport(r);
  return found.empty() ? nullptr : found[0];
}

TEST_F(CheckTensors, IndexAgainstShards) {
  EXPECT_TRUE(Check(TwoShards(Copy("split"), [](ShardIndex&) {})).ok());
  CheckReport unlisted = Check(TwoShards(Copy("unlisted"), [](ShardIndex& idx) {
    std::erase_if(idx.weight_map, [](const auto& kv) { return kv.second == "b.safetensors"; });
  }));
  if (const Finding* f = Only(unlisted, "shard-not-in-index")) {
    EXPECT_EQ(f->file, "b.safetensors");
    EXPECT_EQ(f->severity, Severity::kError);
  }
  CheckReport missing = Check(TwoShards(Copy("missing"), [](ShardIndex& idx) {
    idx.weight_map["model.ghost.weight"] = "model-00009-of-00009.safetensors";
  }));
  if (const Finding* f = Only(missing, "index-file-missing")) {
    EXPECT_EQ(f->file, "model-00009-of-00009.safetensors");
    EXPECT_EQ(f->severity, Severity::kError);
  }
  CheckReport ghost = Check(TwoShards(Copy("ghost"), [](ShardIndex& idx) {
    idx.weight_map["model.layers.0.extra.weight"] = "a.safetensors";
  }));
  if (const Finding* f = Only(ghost, "index-tensor-missing")) {
    EXPECT_EQ(f->module, "model.layers.0.extra.weight");
    EXPECT_EQ(f->severity, Severity::kError);
  }
}

TEST_F(CheckTensors, DuplicateTensorAndInvalidShard) {
  std::string dup = TwoShards(Copy("dup"), [](ShardIndex&) {});
  Tensors b = ReadShard(dup + "/b.safetensors");
  Tensors a = ReadShard(dup + "/a.safetensors");
  std::string name = a.begin()->first;
  b[name] = a.begin()->second;
  WriteShard(dup + "/b.safetensors", b);
  CheckReport r = Check(dup);
  if (const Finding* f = Only(r, "duplicate-tensor")) {
    EXPECT_EQ(f->module, name);
    EXPECT_EQ(f->severity, Severity::kError);
  }
  std::string trailing = TwoShards(Copy("trailing"), [](ShardIndex&) {});
  std::ofstream(trailing + "/b.safetensors", std::ios::app | std::ios::binary) << "trailing";
  CheckReport bad = Check(trailing);
  // v_proj's weight_shape is in the unreadable b.safetensors: the module rules do not run on the
  // incomplete set, so there is no knock-on missing-weight-shape telling the user to requantize.
  ExpectErrorCodes(bad, {"safetensors-invalid"});
  EXPECT_EQ(bad.unreadable_shards, std::vector<std::string>{"b.safetensors"});
  if (const Finding* f = Only(bad, "safetensors-invalid")) {
    EXPECT_EQ(f->file, "b.safetensors");
    EXPECT_EQ(f->severity, Severity::kError);
  }
}

// A 3-bit weight packed the way compressed-tensors before 0.17 did (ten whole values per int32
// word: 103 words for 1024 columns instead of 96) is named as that layout, not as a bad shape.
TEST(CheckPackedLayout, LegacyWholeValuePackingOfThreeBitsIsNamed) {
  spk::testing::ScopedTempDir dir;
  QuantizeOptions o;
  o.source = Example(dir, "src", "llm");
  o.destination = dir / "w3";
  o.plan.scheme = FindScheme("w3a16");
  o.durability = Durability::kPageCache;
  auto q = QuantizeCheckpoint(RunContext{.threads = 1}, o);
  ASSERT_TRUE(q.ok()) << q.status().message();
  ASSERT_FALSE(HasCode(Check(o.destination), "weight-packed-legacy-layout"));
  int64_t out = 0, in = 0;
  EditTensors(o.destination, [&](Tensors& t) {
    int64_t dims[2];
    ASSERT_EQ(t[T(".weight_shape")].bytes.size(), sizeof dims);
    std::memcpy(dims, t[T(".weight_shape")].bytes.data(), sizeof dims);
    out = dims[0];
    in = dims[1];
    TensorBytes& p = t[T(".weight_packed")];
    ASSERT_EQ(p.spec.shape[1], (in * 3 + 31) / 32);  // today's packing, across words
    p.spec.shape[1] = (in + 9) / 10;
    p.bytes.assign(out * p.spec.shape[1] * 4, 0);
  });
  CheckReport r = Check(o.destination);
  auto found = WithCode(r, "weight-packed-legacy-layout");
  ASSERT_EQ(found.size(), 1u) << RenderCheckReport(r);
  EXPECT_EQ(found[0]->module, kModule);
  EXPECT_EQ(found[0]->severity, Severity::kError);
  EXPECT_NE(found[0]->message.find(fmt::format("[{}, {}]", out, (in * 3 + 31) / 32)),
            std::string::npos)
      << found[0]->message;
  EXPECT_FALSE(HasCode(r, "weight-packed-shape")) << RenderCheckReport(r);
}

}  // namespace
}  // namespace spk
