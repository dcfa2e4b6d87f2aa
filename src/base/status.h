// Status and Result<T>: how every layer of sparkulator reports failure.
//
// Error policy: library code never throws across its boundary and never calls exit(). A function
// that can fail returns Status (no value) or Result<T> (a value or a Status). Messages are written
// for the user: they name the file and the tensor and say what to do. The CLI maps a Status code to
// an exit code (ExitCodeFor). Broken invariants inside the library are asserts, not Statuses.
// Thread safety: Status and Result are values; distinct objects may be used from distinct threads.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace spk {

enum class StatusCode {
  kOk = 0,
  kInvalidInput,   // malformed or unsupported input data (exit 2)
  kUsage,          // bad flags or arguments (exit 2)
  kNotFound,       // a named file, tensor or model does not exist (exit 2)
  kAlreadyExists,  // refusing to overwrite (exit 2)
  kIoError,        // the operating system failed a read, write, rename, ... (exit 3)
  kUnavailable,    // a server could not be reached or answered wrongly (exit 3)
  kCancelled,      // interrupted by the user (exit 130)
  kInternal,       // a bug in sparkulator (exit 70)
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidInput(std::string m) { return {StatusCode::kInvalidInput, std::move(m)}; }
  static Status Usage(std::string m) { return {StatusCode::kUsage, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<context>: <message>", for adding the file or tensor name as
  // an error travels up.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Process exit code for a status: 0 ok, 2 usage or input error, 3 I/O error (see docs/design.md).
int ExitCodeFor(const Status& status);

// Result<T>: either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(runtime/explicit)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(runtime/explicit)
    assert(!status_.ok() && "Result constructed from an OK Status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok()
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace spk

#define SPK_CONCAT_INNER(a, b) a##b
#define SPK_CONCAT(a, b) SPK_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` (a Status) is not OK.
#define SPK_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::spk::Status spk_status_ = (expr);        \
    if (!spk_status_.ok()) return spk_status_; \
  } while (0)

// SPK_ASSIGN_OR_RETURN(auto x, ResultExpr()): declares x from the value, or returns the error.
#define SPK_ASSIGN_OR_RETURN(lhs, expr) \
  SPK_ASSIGN_OR_RETURN_IMPL(SPK_CONCAT(spk_result_, __LINE__), lhs, expr)
#define SPK_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
