#include "model/quantized_modules.h"

#include <gtest/gtest.h>

#include <set>

#include "quant/float_quantized.h"
#include "quant/fp4_packed.h"
#include "quant/pack_quantized.h"

namespace spk {
namespace {

std::function<bool(const std::string&)> Has(std::set<std::string> names) {
  return [names](const std::string& n) { return names.count(n) > 0; };
}

TEST(QuantizedModules, PackedFormatsAreKnownByTheirValueTensor) {
  const auto none = Has({});
  EXPECT_EQ(QuantizedModuleOf(PackQuantizedCodec(), "m.q_proj.weight_packed", DType::kI32, none),
            "m.q_proj");
  EXPECT_EQ(QuantizedModuleOf(Nvfp4Codec(), "m.q_proj.weight_packed", DType::kU8, none),
            "m.q_proj");
  EXPECT_EQ(QuantizedModuleOf(PackQuantizedCodec(), "m.norm.weight", DType::kBF16, none),
            std::nullopt);
  EXPECT_TRUE(IsQuantAuxName(Nvfp4Codec(), "m.q_proj.weight_global_scale"));
  EXPECT_FALSE(IsQuantAuxName(Nvfp4Codec(), "m.q_proj.weight_packed"));
}

TEST(QuantizedModules, UnpackedValuesAreQuantizedByTheirScaleOrTheirOneByteDType) {
  const WeightCodec& fp8 = Fp8ChannelCodec();
  EXPECT_EQ(ValueSuffix(fp8), ".weight");
  // A dense norm or embedding has no scale and a float dtype.
  EXPECT_EQ(QuantizedModuleOf(fp8, "m.norm.weight", DType::kBF16, Has({})), std::nullopt);
  EXPECT_EQ(QuantizedModuleOf(fp8, "m.o_proj.weight", DType::kF8E4M3, Has({})), "m.o_proj");
  EXPECT_EQ(QuantizedModuleOf(fp8, "m.o_proj.weight", DType::kBF16, Has({"m.o_proj.weight_scale"})),
            "m.o_proj");
  EXPECT_EQ(QuantizedModuleOf(fp8, "m.o_proj.weight_scale", DType::kBF16, Has({})), std::nullopt);
}

TEST(QuantizedModules, WeightDimsComeFromTheStoredValues) {
  const QuantParams nv{.bits = 4, .symmetric = true, .group_size = 16};
  EXPECT_EQ(WeightDimsFromValues(Nvfp4Codec(), nv, DType::kBF16, {4, 16}),
            (std::pair<int64_t, int64_t>{4, 32}));
  const QuantParams channel{.bits = 8, .symmetric = true, .group_size = kChannelWise};
  EXPECT_EQ(WeightDimsFromValues(Fp8ChannelCodec(), channel, DType::kF16, {3, 5}),
            (std::pair<int64_t, int64_t>{3, 5}));
  EXPECT_EQ(WeightDimsFromValues(Nvfp4Codec(), nv, DType::kBF16, {4, 3}), std::nullopt);
  EXPECT_EQ(WeightDimsFromValues(Nvfp4Codec(), nv, DType::kBF16, {4}), std::nullopt);
  EXPECT_EQ(WeightDTypeOfScales(DType::kF16), DType::kF16);
  EXPECT_EQ(WeightDTypeOfScales(DType::kF8E4M3), DType::kBF16);
}

}  // namespace
}  // namespace spk
