// Test-only helper: writes a small .safetensors file with our writer, each tensor's bytes a
// recognizable pattern (byte k of tensor i is (i * 31 + k) & 0xff). Not part of spk_safetensors.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "io/file.h"
#include "safetensors/writer.h"

namespace spk::testing {

inline uint8_t PatternByte(size_t tensor_index, uint64_t k) {
  return static_cast<uint8_t>((tensor_index * 31 + k) & 0xff);
}

inline void WriteTestSafetensors(const std::string& path, std::vector<TensorSpec> specs,
                                 std::vector<std::pair<std::string, std::string>> metadata = {
                                     {"format", "pt"}}) {
  auto layout = SafetensorsLayout::Plan(std::move(specs), std::move(metadata));
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  auto file = FileSystem::Default()->CreateForWrite(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_TRUE(WriteSafetensorsHeader(**file, *layout).ok());
  for (size_t i = 0; i < layout->tensors().size(); ++i) {
    const std::string& name = layout->tensors()[i].name;
    std::vector<uint8_t> bytes(layout->TensorBytes(name));
    for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = PatternByte(i, k);
    ASSERT_TRUE((*file)->WriteAt(*layout->AbsoluteOffset(name), bytes).ok());
  }
  ASSERT_TRUE((*file)->Close().ok());
}

}  // namespace spk::testing
