// DecodeQuantizedSource on small hand-made ModelOpt sources whose decoded values are worked out by
// hand: the NVFP4 nibble order and ModelOpt's +0 for nibble 8, the FP8 scale rounded to the model's
// dtype before the product, the scales consumed, hf_quant_config.json read in place of a missing
// quantization_config, and a missing scale named with its file; the translation of AutoGPTQ's
// quantize_config.json and AutoAWQ's quant_config.json (SideFileQuantizationConfig). The decode
// against ModelOpt itself is tests/python/test_modelopt_sources.py, against GPTQModel and AutoAWQ
// tests/python/test_gptq_sources.py. MiniMax's MXFP8 (E8M0 weight_scale_inv per 32 inputs): exact
// values of a hand-made block, both scale dtypes, and each bad scale named; against an independent
// numpy decode through quantize, tests/python/test_mxfp8_sources.py.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "io/fs_util.h"
#include "io/test_util.h"
#include "safetensors/writer.h"
#include "source/source.h"
#include "source/source_decode.h"

namespace spk {
namespace {

struct Tensor {
  TensorSpec spec;
  std::vector<uint8_t> bytes;
};

std::vector<uint8_t> F32Bytes(float v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

// A model folder with `config` and one model.safetensors holding `tensors`.
void WriteSource(const std::string& dir, const std::string& config, std::vector<Tensor> tensors) {
  ASSERT_TRUE(WriteWholeFile(dir + "/config.json", config).ok());
  std::vector<TensorSpec> specs;
  for (const Tensor& t : tensors) specs.push_back(t.spec);
  auto layout = SafetensorsLayout::Plan(std::move(specs));
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  std::string file = layout->header_bytes();
  file.resize(layout->file_size());
  for (const Tensor& t : tensors) {
    ASSERT_EQ(t.bytes.size(), layout->TensorBytes(t.spec.name)) << t.spec.name;
    std::memcpy(file.data() + *layout->AbsoluteOffset(t.spec.name), t.bytes.data(), t.bytes.size());
  }
  ASSERT_TRUE(WriteWholeFile(dir + "/model.safetensors", file).ok());
}

constexpr char kNvfp4Config[] =
    R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                "config_groups": {"group_0": {"weights": {"group_size": 16}}}}})";

// One NVFP4 row of 16 values: byte 0 = 0x81 (column 0: nibble 1 = 0.5, column 1: nibble 8 = +0),
// byte 1 = 0xF7 (column 2: 6, column 3: nibble 15 = -6), the rest 0; block scale 2 (E4M3 0x40)
// times weight_scale_2 0.25.
std::vector<Tensor> Nvfp4Tensors(bool with_scale_2) {
  std::vector<uint8_t> packed(8, 0);
  packed[0] = 0x81;
  packed[1] = 0xF7;
  std::vector<Tensor> t = {
      {{"q.weight", DType::kU8, {1, 8}}, packed},
      {{"q.weight_scale", DType::kF8E4M3, {1, 1}}, {0x40}},
      {{"q.input_scale", DType::kF32, {}}, F32Bytes(1.0f)},
      {{"q.k_scale", DType::kF32, {}}, F32Bytes(1.0f)},
      {{"norm.weight", DType::kBF16, {2}}, {0x80, 0x3F, 0x80, 0x3F}},
  };
  if (with_scale_2) t.push_back({{"q.weight_scale_2", DType::kF32, {}}, F32Bytes(0.25f)});
  return t;
}

TEST(SourceDecodeTest, ModeloptNvfp4LowNibbleFirstNibble8IsPlusZeroScalesConsumed) {
  spk::testing::ScopedTempDir dir;
  WriteSource(dir.path(), kNvfp4Config, Nvfp4Tensors(/*with_scale_2=*/true));
  auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
  ASSERT_TRUE(src.ok()) << src.status().message();
  ASSERT_TRUE(DecodeQuantizedSource(&*src).ok());
  ASSERT_EQ(src->tensors.size(), 2u);  // the scales, input_scale and k_scale are consumed
  auto q = FindSourceTensor(*src, "q.weight");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(src->tensors[*q].dtype, DType::kBF16);
  EXPECT_EQ(src->tensors[*q].shape, (std::vector<int64_t>{1, 16}));
  std::vector<uint16_t> row(16);
  ASSERT_TRUE(ReadSourceRows(*src, *q, 0, 1, {reinterpret_cast<uint8_t*>(row.data()), 32}).ok());
  // 0.5 * 0.5, +0 (not -0), 6 * 0.5, -6 * 0.5, then zeros.
  std::vector<uint16_t> want(16, 0x0000);
  want[0] = 0x3E80;
  want[2] = 0x4040;
  want[3] = 0xC040;
  EXPECT_EQ(row, want);
  EXPECT_EQ(src->decoded_from_file, "config.json");
}

TEST(SourceDecodeTest, ModeloptNvfp4WithoutWeightScale2IsRefusedNamingFileAndTensor) {
  spk::testing::ScopedTempDir dir;
  WriteSource(dir.path(), kNvfp4Config, Nvfp4Tensors(/*with_scale_2=*/false));
  auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
  ASSERT_TRUE(src.ok());
  Status s = DecodeQuantizedSource(&*src);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find(dir.path() + "/model.safetensors: tensor 'q.weight'"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("q.weight_scale_2"), std::string::npos) << s.message();
}

// F8_E4M3 1.5 (0x3C) and -1.5 with one F32 scale 1 + 2^-11, in an F16 model described by
// hf_quant_config.json only: ModelOpt rounds the scale to F16 first (a tie, to 1.0), so the values
// stay +-1.5; the F32 product rounded once would be 1.5 + 2^-10.
TEST(SourceDecodeTest, ModeloptFp8RoundsTheScaleToTheDtypeFirstAndReadsHfQuantConfig) {
  spk::testing::ScopedTempDir dir;
  WriteSource(dir.path(),
              R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                  "torch_dtype": "float16"})",
              {{{"q.weight", DType::kF8E4M3, {1, 2}}, {0x3C, 0xBC}},
               {{"q.weight_scale", DType::kF32, {}}, F32Bytes(1.0f + 1.0f / 2048)}});
  ASSERT_TRUE(WriteWholeFile(dir / "hf_quant_config.json",
                             R"({"producer": {"name": "modelopt", "version": "0.29.0"},
                                 "quantization": {"quant_algo": "FP8"}})")
                  .ok());
  auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
  ASSERT_TRUE(src.ok()) << src.status().message();
  ASSERT_TRUE(DecodeQuantizedSource(&*src).ok());
  ASSERT_EQ(src->tensors.size(), 1u);
  EXPECT_EQ(src->tensors[0].dtype, DType::kF16);
  std::vector<uint16_t> row(2);
  ASSERT_TRUE(ReadSourceRows(*src, 0, 0, 1, {reinterpret_cast<uint8_t*>(row.data()), 4}).ok());
  EXPECT_EQ(row, (std::vector<uint16_t>{0x3E00, 0xBE00}));
  EXPECT_EQ(src->decoded_from_file, "hf_quant_config.json");
  EXPECT_NE(src->decoded_from.find("\"quant_algo\":\"FP8\""), std::string::npos);
}

// A GPTQ export whose config.json lost its quantization_config and that has no side file either:
// its packed qweight must not be copied as if it were a dense tensor.
TEST(SourceDecodeTest, QuantizedTensorsWithoutAQuantizationConfigAreRefusedNamingTheTensor) {
  spk::testing::ScopedTempDir dir;
  std::vector<Tensor> tensors = Nvfp4Tensors(/*with_scale_2=*/true);
  tensors[0].spec.name = "model.layers.0.mlp.down_proj.qweight";
  WriteSource(dir.path(), R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"})",
              std::move(tensors));
  auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
  ASSERT_TRUE(src.ok());
  EXPECT_TRUE(src->side_config_file.empty());
  Status s = DecodeQuantizedSource(&*src);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find(dir.path() +
                             "/model.safetensors: tensor 'model.layers.0.mlp.down_proj.qweight'"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("config.json has no quantization_config"), std::string::npos);
}

// ModelOpt's fused 3-D experts (gpt-oss, Llama4: packed U8 [E, in / 2, out] beside a 3-D
// X_weight_scale) are refused naming the fused tensor, not split as if their bytes were dense rows.
TEST(SourceDecodeTest, ModeloptFusedExpertsAreRefusedBeforeSplitting) {
  spk::testing::ScopedTempDir dir;
  const std::string fused = "model.layers.0.mlp.experts.gate_up_proj";
  WriteSource(
      dir.path(), kNvfp4Config,
      {{{fused, DType::kU8, {2, 8, 4}}, std::vector<uint8_t>(64, 0x11)},
       {{fused + "_weight_scale", DType::kF8E4M3, {2, 1, 4}}, std::vector<uint8_t>(8, 0x38)},
       {{fused + "_weight_scale_2", DType::kF32, {}}, F32Bytes(1.0f)}});
  auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
  ASSERT_TRUE(src.ok()) << src.status().message();
  Status s = ExpandFusedExperts(&*src);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find(dir.path() + "/model.safetensors: tensor '" + fused +
                             "': a quantized fused 3-D expert tensor (U8 [2, 8, 4]"),
            std::string::npos)
      << s.message();
}

using Json = nlohmann::ordered_json;

Json Translate(std::string_view file, std::string_view text) {
  auto qc = SideFileQuantizationConfig("/m", file, text);
  EXPECT_TRUE(qc.ok()) << qc.status().message();
  return qc.ok() ? *qc : Json();
}

// AutoGPTQ's quantize_config.json (0.4: no quant_method, no checkpoint_format; 0.6:
// is_marlin_format false) is the gptq quantization_config with quant_method added; every key kept.
TEST(SourceDecodeTest, AutoGptqQuantizeConfigIsGptqWithEveryKeyKept) {
  EXPECT_EQ(Translate("quantize_config.json",
                      R"({"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": true,
                          "static_groups": false, "sym": true, "true_sequential": true,
                          "model_name_or_path": null,
                          "model_file_base_name": "gptq_model-4bit-128g"})"),
            Json::parse(R"({"quant_method": "gptq", "bits": 4, "group_size": 128,
                            "damp_percent": 0.01, "desc_act": true, "static_groups": false,
                            "sym": true, "true_sequential": true, "model_name_or_path": null,
                            "model_file_base_name": "gptq_model-4bit-128g"})"));
  EXPECT_EQ(Translate("quantize_config.json",
                      R"({"bits": 8, "is_marlin_format": false, "quant_method": "GPTQ",
                          "checkpoint_format": "gptq_v2"})"),
            Json::parse(R"({"quant_method": "gptq", "bits": 8, "checkpoint_format": "gptq_v2"})"));
}

// AutoAWQ's quant_config.json as AwqConfig.to_transformers_dict writes it: w_bit -> bits,
// q_group_size -> group_size, version lower-cased; quant_method awq. A quantize_config.json with
// AutoAWQ's keys (vLLM's AWQConfig reads both names) is awq too; GPTQModel's says so itself.
TEST(SourceDecodeTest, AutoAwqQuantConfigIsAwqWithTransformersNames) {
  const Json want = Json::parse(
      R"({"quant_method": "awq", "zero_point": true, "group_size": 128, "bits": 4,
          "version": "gemm"})");
  const char* autoawq = R"({"zero_point": true, "q_group_size": 128, "w_bit": 4,
                            "version": "GEMM"})";
  EXPECT_EQ(Translate("quant_config.json", autoawq), want);
  EXPECT_EQ(Translate("quantize_config.json", autoawq), want);
  EXPECT_EQ(Translate("quantize_config.json",
                      R"({"bits": 4, "group_size": 64, "quant_method": "awq", "format": "gemm"})"),
            Json::parse(R"({"quant_method": "awq", "bits": 4, "group_size": 64,
                            "format": "gemm"})"));
}

// ModelOpt's hf_quant_config.json is its quantization config as it is.
TEST(SourceDecodeTest, HfQuantConfigIsReadAsItIs) {
  const char* text = R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}})";
  EXPECT_EQ(Translate("hf_quant_config.json", text), Json::parse(text));
}

// What cannot be decoded is refused naming the file and the key.
TEST(SourceDecodeTest, SideFilesThatCannotBeDecodedAreRefusedNamingFileAndKey) {
  const std::vector<std::tuple<std::string, std::string, std::vector<std::string>>> cases = {
      {"quantize_config.json", R"({"bits": 4,)", {"/m/quantize_config.json: "}},
      {"quantize_config.json", R"([4])", {"/m/quantize_config.json: not a JSON object"}},
      {"quantize_config.json",
       R"({"group_size": 128, "desc_act": false})",
       {"/m/quantize_config.json: no bits"}},
      {"quant_config.json",
       R"({"zero_point": true, "w_bit": 4, "version": "GEMM"})",
       {"/m/quant_config.json: no group_size (AutoAWQ's q_group_size)"}},
      {"quant_config.json",
       R"({"q_group_size": 128, "version": "GEMM"})",
       {"/m/quant_config.json: no bits (AutoAWQ's w_bit)"}},
      {"quant_config.json",
       R"({"w_bit": 4, "bits": 8, "q_group_size": 128})",
       {"/m/quant_config.json: w_bit 4 but bits 8"}},
      {"quantize_config.json",
       R"({"bits": 4, "is_marlin_format": true})",
       {"/m/quantize_config.json: is_marlin_format true"}},
      {"quantize_config.json",
       R"({"bits": 4, "quant_method": "bitblas"})",
       {"/m/quantize_config.json: quant_method bitblas"}},
      {"quantize_config.json",
       R"({"bits": 4, "quant_method": 1})",
       {"/m/quantize_config.json: quant_method 1 is not a string"}},
  };
  for (const auto& [file, text, words] : cases) {
    auto qc = SideFileQuantizationConfig("/m", file, text);
    ASSERT_FALSE(qc.ok()) << file << " " << text;
    EXPECT_EQ(qc.status().code(), StatusCode::kInvalidInput);
    for (const std::string& w : words) {
      EXPECT_NE(qc.status().message().find(w), std::string::npos) << qc.status().message();
    }
  }
}

// A folder with quantize_config.json only: read in config.json's place (and named as its source),
// a bits value the gptq format does not decode refused naming the file and the key.
TEST(SourceDecodeTest, QuantizeConfigJsonIsReadInPlaceOfAMissingQuantizationConfig) {
  spk::testing::ScopedTempDir dir;
  WriteSource(dir.path(), R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"})",
              {{{"norm.weight", DType::kBF16, {2}}, {0x80, 0x3F, 0x80, 0x3F}}});
  ASSERT_TRUE(
      WriteWholeFile(dir / "quantize_config.json", R"({"bits": 3, "group_size": 128})").ok());
  ASSERT_TRUE(WriteWholeFile(dir / "quant_config.json", R"({"w_bit": 4})").ok());  // not read
  auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_EQ(src->side_config_file, "quantize_config.json");
  Status s = DecodeQuantizedSource(&*src);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find(dir.path() + "/quantize_config.json: the model is already quantized "
                                          "(quant_method gptq with bits 3"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(src->decoded_from_file, "quantize_config.json");
}

TEST(SourceDecodeTest, AProducerNameThatIsNotAStringIsNoModeloptAndNoException) {
  // nlohmann's value("name", "") throws on a number; the config is a user's file.
  auto config = ParseModelConfig("config.json", R"({"architectures": ["LlamaForCausalLM"],
      "quantization_config": {"producer": {"name": 5}, "quant_algo": "FP8"}})");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(SourceQuantMethod(*config), "");
  auto named = ParseModelConfig("config.json", R"({"architectures": ["LlamaForCausalLM"],
      "quantization_config": {"producer": {"name": "modelopt"}, "quant_algo": "FP8"}})");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(SourceQuantMethod(*named), "modelopt");
}

// MiniMax-M3's MXFP8 (quant_method "mxfp8"): a weight [2, 64] F8_E4M3, two blocks of 32 inputs a
// row, with U8 E8M0 exponents in weight_scale_inv [2, 2]. Decoded values, each 2^(e - 127) times
// the E4M3 value, rounded to BF16:
//   [0][0]  1.0   (0x38) * 2^(128-127) =  2.0     BF16 0x4000
//   [0][33] -2.0  (0xC0) * 2^(120-127) = -2^-6    BF16 0xBC80
//   [1][5]  448   (0x7E) * 2^(127-127) =  448     BF16 0x43E0
//   [1][40] 2^-9  (0x01, subnormal) * 2^(136-127) = 1.0   BF16 0x3F80
constexpr char kMxfp8Config[] =
    R"({"architectures": ["DSparkMiniMaxDraftModel"], "model_type": "minimax_m3_vl_text",
        "quantization_config": {"quant_method": "mxfp8", "ignored_layers": ["fc"]}})";

std::vector<Tensor> Mxfp8Tensors(DType scale_dtype, std::vector<int64_t> scale_shape) {
  std::vector<uint8_t> values(2 * 64, 0);
  values[0] = 0x38;
  values[33] = 0xC0;
  values[64 + 5] = 0x7E;
  values[64 + 40] = 0x01;
  int64_t scale_count = 1;
  for (int64_t d : scale_shape) scale_count *= d;
  std::vector<uint8_t> scales(static_cast<size_t>(scale_count) * DTypeBits(scale_dtype) / 8, 127);
  if (scale_shape == std::vector<int64_t>{2, 2} && scale_dtype != DType::kF32) {
    scales = {128, 120, 127, 136};
  }
  return {
      {{"layers.0.mlp.down_proj.weight", DType::kF8E4M3, {2, 64}}, values},
      {{"layers.0.mlp.down_proj.weight_scale_inv", scale_dtype, scale_shape}, scales},
      {{"fc.weight", DType::kBF16, {1, 2}}, {0x80, 0x3F, 0x00, 0x40}},  // ignored: dense 1, 2
  };
}

TEST(SourceDecodeTest, Mxfp8E8M0BlocksOf32DecodeExactlyAndTheScalesAreConsumed) {
  for (DType scale_dtype : {DType::kU8, DType::kF8E8M0}) {
    spk::testing::ScopedTempDir dir;
    WriteSource(dir.path(), kMxfp8Config, Mxfp8Tensors(scale_dtype, {2, 2}));
    auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
    ASSERT_TRUE(src.ok()) << src.status().message();
    Status s = DecodeQuantizedSource(&*src);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(src->tensors.size(), 2u);  // weight_scale_inv consumed
    auto w = FindSourceTensor(*src, "layers.0.mlp.down_proj.weight");
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(src->tensors[*w].dtype, DType::kBF16);
    std::vector<uint16_t> rows(2 * 64);
    ASSERT_TRUE(
        ReadSourceRows(*src, *w, 0, 2, {reinterpret_cast<uint8_t*>(rows.data()), 256}).ok());
    std::vector<uint16_t> want(2 * 64, 0x0000);
    want[0] = 0x4000;
    want[33] = 0xBC80;
    want[64 + 5] = 0x43E0;
    want[64 + 40] = 0x3F80;
    EXPECT_EQ(rows, want) << DTypeName(scale_dtype);
    // Row 1 alone: its scales are read from the second scale row.
    std::vector<uint16_t> row1(64);
    ASSERT_TRUE(
        ReadSourceRows(*src, *w, 1, 1, {reinterpret_cast<uint8_t*>(row1.data()), 128}).ok());
    EXPECT_EQ(row1, std::vector<uint16_t>(want.begin() + 64, want.end()));
    EXPECT_NE(src->decoded_from.find("\"quant_method\":\"mxfp8\""), std::string::npos);
  }
}

// Each error names the file and the tensor and says what was expected.
TEST(SourceDecodeTest, Mxfp8ScalesOfTheWrongShapeDtypeOrValueAreRefusedNamingTheTensor) {
  const std::string scale = "layers.0.mlp.down_proj.weight_scale_inv";
  struct Case {
    DType dtype;
    std::vector<int64_t> shape;
    std::string want;
  };
  const std::vector<Case> cases = {
      // One scale per 128 x 128 block (DeepSeek's fp8 layout) is not MXFP8's [rows, cols / 32].
      {DType::kU8, {1, 1}, "shape [1, 1] where the weight's [2, 64] in 1x32 blocks needs [2, 2]"},
      {DType::kF32, {2, 2}, "dtype F32 where U8 (or F8_E8M0) E8M0 exponents"},
  };
  for (const Case& c : cases) {
    spk::testing::ScopedTempDir dir;
    WriteSource(dir.path(), kMxfp8Config, Mxfp8Tensors(c.dtype, c.shape));
    auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
    ASSERT_TRUE(src.ok());
    Status s = DecodeQuantizedSource(&*src);
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
    EXPECT_NE(s.message().find(dir.path() + "/model.safetensors: tensor '" + scale + "'"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find(c.want), std::string::npos) << s.message();
  }
  // E8M0 255 is NaN: found as the rows are read, naming the scale and its block.
  spk::testing::ScopedTempDir dir;
  std::vector<Tensor> tensors = Mxfp8Tensors(DType::kU8, {2, 2});
  tensors[1].bytes[3] = 255;
  WriteSource(dir.path(), kMxfp8Config, std::move(tensors));
  auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(DecodeQuantizedSource(&*src).ok());
  std::vector<uint16_t> rows(2 * 64);
  Status s = ReadSourceRows(*src, *FindSourceTensor(*src, "layers.0.mlp.down_proj.weight"), 0, 2,
                            {reinterpret_cast<uint8_t*>(rows.data()), 256});
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("tensor '" + scale + "': non-finite scale inf at block [1, 1]"),
            std::string::npos)
      << s.message();
}

// vLLM refuses an MXFP8 weight whose inputs are not whole blocks of 32; the grid is not rounded up
// as fp8's is, so the weight itself is named.
TEST(SourceDecodeTest, Mxfp8InputsThatAreNotWholeBlocksAreRefusedNamingTheWeight) {
  spk::testing::ScopedTempDir dir;
  WriteSource(dir.path(), kMxfp8Config,
              {{{"w.weight", DType::kF8E4M3, {1, 48}}, std::vector<uint8_t>(48, 0x38)},
               {{"w.weight_scale_inv", DType::kU8, {1, 2}}, {127, 127}}});
  auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
  ASSERT_TRUE(src.ok());
  Status s = DecodeQuantizedSource(&*src);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find(dir.path() + "/model.safetensors: tensor 'w.weight': 48 inputs, not "
                                          "a multiple of the MXFP8 block 32"),
            std::string::npos)
      << s.message();
}

// A weight without its scale, and the MXFP8 configs not decoded (ModelOpt's form, MiniMax-M3's
// NVFP4 routed experts), are refused with what to do.
TEST(SourceDecodeTest, Mxfp8WithoutItsScaleOrInAFormNotDecodedIsRefused) {
  {
    spk::testing::ScopedTempDir dir;
    std::vector<Tensor> tensors = Mxfp8Tensors(DType::kU8, {2, 2});
    tensors.erase(tensors.begin() + 1);
    WriteSource(dir.path(), kMxfp8Config, std::move(tensors));
    auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
    ASSERT_TRUE(src.ok());
    Status s = DecodeQuantizedSource(&*src);
    EXPECT_NE(s.message().find("tensor 'layers.0.mlp.down_proj.weight': F8_E4M3 without its "
                               "layers.0.mlp.down_proj.weight_scale_inv"),
              std::string::npos)
        << s.message();
  }
  for (const char* qc : {R"({"quant_method": "mxfp8", "moe_quant_algo": "NVFP4"})",
                         R"({"quant_method": "mxfp8", "quantization": {"quant_algo": "MXFP8"}})"}) {
    spk::testing::ScopedTempDir dir;
    WriteSource(dir.path(),
                std::string(R"({"architectures": ["X"], "quantization_config": )") + qc + "}",
                Mxfp8Tensors(DType::kU8, {2, 2}));
    auto src = OpenSourceCheckpoint(FileSystem::Default(), dir.path());
    ASSERT_TRUE(src.ok());
    Status s = DecodeQuantizedSource(&*src);
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
    EXPECT_NE(s.message().find(dir.path() + "/config.json: the model is already quantized "
                                            "(quant_method mxfp8"),
              std::string::npos)
        << s.message();
  }
}

}  // namespace
}  // namespace spk
