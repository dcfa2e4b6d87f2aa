// Helpers shared by the io and safetensors tests: a fresh, uniquely named folder under
// ::testing::TempDir() that is removed when the test ends, and the read mode of the POSIX file
// system for one scope. Test-only; not part of spk_io.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace spk::testing {

class ScopedTempDir {
 public:
  ScopedTempDir() {
    static std::atomic<int> counter{0};
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("spk_") + (info ? info->name() : "test") + "_" +
                       std::to_string(::getpid()) + "_" + std::to_string(counter++);
    path_ = (std::filesystem::path(::testing::TempDir()) / name).string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// SPARKULATOR_READ for one scope ("" unsets it: the default, mapped reads and kernel copies;
// "pread": copies through user memory). Files opened in the scope keep the mode.
class ScopedReadMode {
 public:
  explicit ScopedReadMode(const char* mode) {
    if (*mode != '\0') {
      ::setenv("SPARKULATOR_READ", mode, 1);
    } else {
      ::unsetenv("SPARKULATOR_READ");
    }
  }
  ~ScopedReadMode() { ::unsetenv("SPARKULATOR_READ"); }
  ScopedReadMode(const ScopedReadMode&) = delete;
  ScopedReadMode& operator=(const ScopedReadMode&) = delete;
};

}  // namespace spk::testing
