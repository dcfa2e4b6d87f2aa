// The registry's rows, iterated: every row is well-formed, findable by name and by its config
// fields, stores the tensors docs/formats.md describes, and its codec round-trips a weight exactly
// as the scalar reference (quant/rtn.h) does.
#include "quant/scheme.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/test_util.h"
#include "quant/pack_quantized.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

TEST(SchemeTest, RowsAreWellFormedAndFindable) {
  std::set<std::string_view> names;
  for (const QuantScheme& s : AllSchemes()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_EQ(FindScheme(s.name), &s);
    EXPECT_EQ(FindSchemeFor(s.format, WeightTypeName(s.type), s.bits, s.symmetric,
                            StrategyName(s.strategy, s.default_group_size)),
              &s)
        << s.name;
    ASSERT_NE(s.codec, nullptr) << s.name;
    EXPECT_EQ(s.codec->format(), s.format) << s.name;
    EXPECT_FALSE(s.summary.empty());
    EXPECT_TRUE(AllowsGroupSize(s, s.default_group_size)) << s.name;
    for (int64_t g : s.group_sizes) {
      EXPECT_TRUE(ValidateParams(ParamsFor(s, g)).ok()) << s.name << " " << g;
      EXPECT_TRUE(ValidateGroupSize(s, g).ok());
    }
  }
  EXPECT_EQ(names,
            (std::set<std::string_view>{
                "w4a16",    "w4a16-asym", "w8a16",   "w8a16-asym", "w2a16",       "w2a16-asym",
                "w3a16",    "w3a16-asym", "w5a16",   "w5a16-asym", "w6a16",       "w6a16-asym",
                "w7a16",    "w7a16-asym", "w4afp8",  "w8a8",       "fp8-dynamic", "fp8-block",
                "nvfp4a16", "mxfp4a16",   "mxfp8a16"}));
}

// What the model card says of a row (card/card.cc): the kernels vLLM runs it on, in words that
// match its weights (no 4-bit kernel for an FP8 row), and the number type it tags.
TEST(SchemeTest, EveryRowSaysItsKernelsAndNumberType) {
  for (const QuantScheme& s : AllSchemes()) {
    SCOPED_TRACE(s.name);
    const std::string kernels(s.kernels);
    ASSERT_FALSE(kernels.empty());
    const bool packed = s.codec == &PackQuantizedCodec();
    const bool fast_wna16 = packed && (s.bits == 4 || s.bits == 8);
    // Marlin and Machete: int4 with or without zero points, int8 symmetric (Marlin takes no
    // asymmetric int8).
    for (int bits : {4, 8}) {
      const bool claimed = kernels.find(fmt::format("W{}A16 kernels", bits)) != std::string::npos;
      EXPECT_EQ(claimed, packed && s.bits == bits && (s.symmetric || bits == 4)) << bits;
    }
    if (packed && !fast_wna16) {
      EXPECT_NE(kernels.find("HummingLinearKernel"), std::string::npos);
      EXPECT_NE(kernels.find(WeightNumberName(s)), std::string::npos);
    }
    if (s.type == WeightType::kFloat) {
      EXPECT_TRUE(kernels.find(fmt::format("FP{}", s.bits)) != std::string::npos ||
                  kernels.find(fmt::format("Fp{}", s.bits)) != std::string::npos)
          << "a float row's kernels name its FP" << s.bits << " number type";
      EXPECT_EQ(kernels.find("A16 kernels"), std::string::npos);
    }
  }
  EXPECT_EQ(WeightNumberName(*FindScheme("w4a16")), "int4");
  EXPECT_EQ(WeightNumberName(*FindScheme("w3a16-asym")), "int3");
  EXPECT_EQ(WeightNumberName(*FindScheme("w8a8")), "int8");
  EXPECT_EQ(WeightNumberName(*FindScheme("w4afp8")), "int4");
  EXPECT_EQ(WeightNumberName(*FindScheme("fp8-dynamic")), "fp8");
  EXPECT_EQ(WeightNumberName(*FindScheme("fp8-block")), "fp8");
  EXPECT_EQ(WeightNumberName(*FindScheme("nvfp4a16")), "nvfp4");
  EXPECT_EQ(WeightNumberName(*FindScheme("mxfp4a16")), "mxfp4");
  EXPECT_EQ(WeightNumberName(*FindScheme("mxfp8a16")), "mxfp8");
}

// --scheme takes our names and llm-compressor's preset names, in any case.
TEST(SchemeTest, FindSchemeTakesPresetNamesInAnyCase) {
  ASSERT_NE(FindScheme("w4a16"), nullptr);
  EXPECT_EQ(FindScheme("w4a16")->bits, 4);
  EXPECT_TRUE(FindScheme("w4a16")->symmetric);
  EXPECT_FALSE(FindScheme("w8a16-asym")->symmetric);
  EXPECT_EQ(FindScheme("W4A16"), FindScheme("w4a16"));
  EXPECT_EQ(FindScheme("W4A16_ASYM"), FindScheme("w4a16-asym"));
  EXPECT_EQ(FindScheme("FP8_DYNAMIC"), FindScheme("fp8-dynamic"));
  EXPECT_EQ(FindScheme("fp8_block"), FindScheme("fp8-block"));
  EXPECT_EQ(FindScheme("INT8"), FindScheme("w8a8"));
  EXPECT_EQ(FindScheme("NvFp4A16"), FindScheme("nvfp4a16"));
  EXPECT_EQ(FindScheme("w4a16 "), nullptr);
  EXPECT_EQ(FindScheme(""), nullptr);
  EXPECT_EQ(FindScheme("NVFP4"), nullptr);  // activation FP4: not a data-free preset we write
  EXPECT_EQ(FindSchemeFor("float-quantized", "float", 8, true, "tensor"), nullptr);
  EXPECT_EQ(FindSchemeFor("pack-quantized", "int", 1, true, "group"), nullptr);
  EXPECT_EQ(FindSchemeFor("pack-quantized", "int", 3, true, "group"), FindScheme("w3a16"));
  EXPECT_EQ(FindSchemeFor("pack-quantized", "int", 7, false, "channel"), FindScheme("w7a16-asym"));
  // compressed-tensors' presets W2A16 .. W7A16 are the symmetric rows; the asymmetric rows have
  // none (W3A16_ASYM is our spelling of the row name, which --scheme takes too).
  EXPECT_EQ(FindScheme("W3A16")->preset, "W3A16");
  EXPECT_EQ(FindScheme("W5A16_ASYM"), FindScheme("w5a16-asym"));
  EXPECT_EQ(FindScheme("w5a16-asym")->preset, "");
  EXPECT_EQ(FindScheme("W1A16"), nullptr);
  EXPECT_EQ(FindSchemeFor("int-quantized", "int", 8, true, "channel"), FindScheme("w8a8"));
  EXPECT_EQ(FindSchemeFor("pack-quantized", "int", 8, true, "channel"), FindScheme("w8a16"));
  EXPECT_EQ(FindSchemeFor("float-quantized", "float", 8, true, "block"), FindScheme("fp8-block"));
  EXPECT_EQ(FindScheme("w4a16")->preset, "W4A16");
}

TEST(SchemeTest, GroupSizes) {
  const QuantScheme& s = *FindScheme("w4a16");
  EXPECT_EQ(GroupSizeList(s), "32, 64, 128 or -1 (channel-wise)");
  Status bad = ValidateGroupSize(s, 48);
  EXPECT_EQ(bad.code(), StatusCode::kUsage);
  EXPECT_EQ(bad.message(),
            "--group-size 48 is not supported: use 32, 64, 128 or -1 (channel-wise)");
  EXPECT_FALSE(AllowsGroupSize(s, 0));
  const QuantParams p = ParamsFor(*FindScheme("w8a16-asym"), kChannelWise);
  EXPECT_EQ(p.bits, 8);
  EXPECT_FALSE(p.symmetric);
  EXPECT_EQ(p.group_size, -1);
}

// docs/formats.md 2 and 2.3, per row: weight_packed I32 [rows, cols*bits/32], weight_scale in the
// weight dtype [rows, groups], weight_shape I64 [2], and weight_zero_point I32 [rows*bits/32,
// groups] only for asymmetric rows.
TEST(SchemeTest, StoredTensorsPerRow) {
  const int64_t rows = 64, cols = 256;
  for (const QuantScheme& s : AllSchemes()) {
    if (s.codec != &PackQuantizedCodec()) continue;  // the float formats: quant/codecs_test.cc
    for (int64_t g : s.group_sizes) {
      const QuantParams p = ParamsFor(s, g);
      ASSERT_TRUE(s.codec->Validate(p, DType::kBF16, rows, cols).ok());
      auto t = s.codec->Tensors(p, DType::kF16, rows, cols);
      const int64_t groups = g == kChannelWise ? 1 : cols / g;
      ASSERT_EQ(t.size(), s.symmetric ? 3u : 4u) << s.name;
      EXPECT_EQ(t[0].suffix, ".weight_packed");
      EXPECT_EQ(t[0].dtype, DType::kI32);
      EXPECT_EQ(t[0].shape, (std::vector<int64_t>{rows, cols * s.bits / 32}));
      EXPECT_EQ(t[1].suffix, ".weight_scale");
      EXPECT_EQ(t[1].dtype, DType::kF16);
      EXPECT_EQ(t[1].shape, (std::vector<int64_t>{rows, groups}));
      EXPECT_EQ(t[2].suffix, ".weight_shape");
      EXPECT_EQ(t[2].dtype, DType::kI64);
      EXPECT_EQ(t[2].shape, (std::vector<int64_t>{2}));
      if (!s.symmetric) {
        EXPECT_EQ(t[3].suffix, ".weight_zero_point");
        EXPECT_EQ(t[3].shape, (std::vector<int64_t>{rows * s.bits / 32, groups}));
      }
      for (const StoredTensor& st : t) {
        EXPECT_NE(std::find(s.codec->suffixes().begin(), s.codec->suffixes().end(), st.suffix),
                  s.codec->suffixes().end());
        EXPECT_EQ(FindRole(t, st.role), &st);
      }
    }
    SCOPED_TRACE(s.name);
    test_util::ExpectError(s.codec->Validate(ParamsFor(s, 128), DType::kBF16, rows, 200),
                           StatusCode::kInvalidInput,
                           "a [64, 200] weight cannot be stored with group size 128");
    test_util::ExpectError(s.codec->Validate(ParamsFor(s, 128), DType::kI32, rows, cols),
                           StatusCode::kInvalidInput, "weight dtype I32 cannot be quantized");
  }
}

// Every row's codec, both methods: the fast kernels write exactly the reference's bytes, and the
// codec's dequantization is the reference's, within half a step of every original weight for RTN.
TEST(SchemeTest, CodecRoundTripsPerRow) {
  const int64_t rows = 8, cols = 256;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& v : w) v = normal(rng);
  std::vector<uint8_t> bf16(w.size() * 2);
  ConvertFromFloat(DType::kBF16, w.data(), bf16.data(), w.size());
  std::vector<float> w_bf16(w.size());
  ConvertToFloat(DType::kBF16, bf16.data(), w_bf16.data(), w.size());
  for (const QuantScheme& s : AllSchemes()) {
    if (s.codec != &PackQuantizedCodec()) continue;
    for (int64_t g : s.group_sizes) {
      const QuantParams p = ParamsFor(s, g);
      const int64_t groups = g == kChannelWise ? 1 : cols / g;
      const int64_t words = PackedWords(cols, p.bits);
      for (QuantMethod method : {QuantMethod::kRtn, QuantMethod::kSearch}) {
        std::vector<int32_t> packed(static_cast<size_t>(rows * words));
        std::vector<uint8_t> scales(static_cast<size_t>(rows * groups) * 2);
        std::vector<int32_t> zp(p.symmetric ? 0 : static_cast<size_t>(rows * groups));
        RowBlockBytes out;
        out[TensorRole::kPacked] = reinterpret_cast<uint8_t*>(packed.data());
        out[TensorRole::kScale] = scales.data();
        out[TensorRole::kZeroPoint] = p.symmetric ? nullptr : reinterpret_cast<uint8_t*>(zp.data());
        ASSERT_TRUE(
            s.codec->QuantizeRows(p, method, DType::kBF16, bf16.data(), rows, cols, 0.0f, out)
                .ok());
        if (method == QuantMethod::kRtn) {
          std::vector<int32_t> ref_packed(packed.size());
          std::vector<uint8_t> ref_scales(scales.size());
          std::vector<int32_t> ref_zp(zp.size());
          ASSERT_TRUE(QuantizeRowsRtn(p, DType::kBF16, bf16.data(), rows, cols,
                                      {ref_packed.data(), ref_scales.data(),
                                       p.symmetric ? nullptr : ref_zp.data()})
                          .ok());
          EXPECT_EQ(packed, ref_packed) << s.name << " g" << g;
          EXPECT_EQ(scales, ref_scales) << s.name << " g" << g;
          EXPECT_EQ(zp, ref_zp) << s.name << " g" << g;
        }
        std::vector<uint8_t> deq(bf16.size());
        ASSERT_TRUE(
            s.codec->DequantizeRows(p, DType::kBF16, out, 0.0f, rows, cols, deq.data()).ok());
        std::vector<float> back(w.size()), scale_f(static_cast<size_t>(rows * groups));
        ConvertToFloat(DType::kBF16, deq.data(), back.data(), back.size());
        ConvertToFloat(DType::kBF16, scales.data(), scale_f.data(), scale_f.size());
        double err = 0, energy = 0;
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            size_t i = static_cast<size_t>(r * cols + c);
            float step = scale_f[static_cast<size_t>(r * groups + c / GroupWidth(cols, g))];
            if (method == QuantMethod::kRtn) {
              // Half a step, plus the BF16 rounding of the product. An asymmetric scale is
              // (max - min) / (2^bits - 1) rounded to BF16 (8 significant bits): it may cover the
              // range short by 2^-9 of 255 steps at int8, so the extremes clip by up to half a
              // step more.
              const float steps = p.symmetric ? 0.5f : 1.0f;
              EXPECT_LE(std::abs(back[i] - w_bf16[i]), steps * step + std::abs(w_bf16[i]) / 128)
                  << s.name << " g" << g << " row " << r << " col " << c;
            }
            err += (back[i] - w_bf16[i]) * (back[i] - w_bf16[i]);
            energy += w_bf16[i] * w_bf16[i];
          }
        }
        // Distortion: RTN of Gaussian weights has a relative error of about
        // 0.8 / (2^(bits-1) - 1/2) (a step of absmax / (qmax + 1/2), absmax ~3 sigma, error
        // step / sqrt(12)); bounded with 1.5x margin: int2 0.8, int4 0.16, int8 0.0094.
        const double bound = 1.2 / (std::ldexp(1.0, s.bits - 1) - 0.5);
        EXPECT_LT(std::sqrt(err / energy), bound) << s.name << " g" << g;
      }
    }
  }
}

}  // namespace
}  // namespace spk
