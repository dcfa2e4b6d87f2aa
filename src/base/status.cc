#include "base/status.h"

namespace spk {

std::string Status::ToString() const {
  if (ok()) return "OK";
  return message_;
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidInput:
    case StatusCode::kUsage:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
      return 2;
    case StatusCode::kIoError:
    case StatusCode::kUnavailable:
      return 3;
    case StatusCode::kCancelled:
      return 130;
    case StatusCode::kInternal:
      return 70;
  }
  return 70;
}

}  // namespace spk
