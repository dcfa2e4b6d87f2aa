// Test-only helpers for the checkpoint layer's unit tests (not compiled into the library).
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "model/model_config.h"

namespace spk::test_util {

// Parses config.json text that the test knows to be valid; a parse error fails the test.
inline ModelConfig ConfigFromJson(std::string_view json) {
  auto c = ParseModelConfig("config.json", json);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(c).value();
}

}  // namespace spk::test_util
