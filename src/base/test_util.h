// Test-only helpers for any layer's unit tests (not compiled into a library): assert that a Status
// or Result is a specific error, so a rejection test fails when the code rejects for another
// reason.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "base/status.h"

namespace spk::test_util {

inline const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "kOk";
    case StatusCode::kInvalidInput:
      return "kInvalidInput";
    case StatusCode::kUsage:
      return "kUsage";
    case StatusCode::kNotFound:
      return "kNotFound";
    case StatusCode::kAlreadyExists:
      return "kAlreadyExists";
    case StatusCode::kIoError:
      return "kIoError";
    case StatusCode::kUnavailable:
      return "kUnavailable";
    case StatusCode::kCancelled:
      return "kCancelled";
    case StatusCode::kInternal:
      return "kInternal";
  }
  return "unknown StatusCode";
}

// Expects `status` to be an error of `code` whose message contains `message_part`; a mismatch is a
// gtest failure at the caller's line that shows the actual code and message. The caller's line
// comes from __builtin_FILE/__builtin_LINE (GCC and Clang): the sanitizer build's clang cannot use
// libstdc++'s std::source_location.
inline void ExpectError(const Status& status, StatusCode code, std::string_view message_part,
                        const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  if (status.code() == code && status.message().find(message_part) != std::string::npos) return;
  ADD_FAILURE_AT(file, line) << "expected error " << StatusCodeName(code)
                             << " with a message containing \"" << message_part
                             << "\"\n  actual: " << StatusCodeName(status.code()) << ": \""
                             << status.message() << "\"";
}

template <typename T>
void ExpectError(const Result<T>& result, StatusCode code, std::string_view message_part,
                 const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ExpectError(result.ok() ? Status::Ok() : result.status(), code, message_part, file, line);
}

}  // namespace spk::test_util
