// A small blocking HTTP/1.1 client over POSIX sockets, made for talking to a local inference
// server.
//
// Why not a library client: the benchmark needs the arrival time of every body fragment of a
// streamed response (to time tokens), a hard idle timeout, and a way to abandon a request when the
// user presses Ctrl-C. A short client that owns its socket gives all three without surprises.
//
// Ownership: every call opens its own connection ("Connection: close") and closes it before
// returning; nothing is shared between calls. The BodySink is called synchronously on the calling
// thread. Thread safety: the functions are reentrant; distinct threads may issue requests
// concurrently. Error policy: no exceptions. Unreachable servers, timeouts and protocol errors come
// back as Status::Unavailable with the address in the message; cancellation as Status::Cancelled. A
// non-2xx HTTP status is NOT an error at this level: the Response carries it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace spk::http {

using Clock = std::chrono::steady_clock;

// An http:// base address: host, port and an optional path prefix (no trailing slash).
struct Url {
  std::string host;
  int port = 80;
  std::string base_path;

  std::string ToString() const;
};

// Parses "http://host[:port][/prefix]". https is refused (local servers only).
Result<Url> ParseUrl(std::string_view text);

struct Response {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;  // empty when a BodySink consumed the body

  // The first header with this (lower-case) name, or "".
  std::string Header(std::string_view lower_name) const;
};

struct RequestOptions {
  std::chrono::milliseconds connect_timeout{5000};
  // Longest silence allowed while waiting for any byte of the response.
  std::chrono::milliseconds idle_timeout{60000};
  // Longest time for the whole exchange.
  std::chrono::milliseconds total_timeout{600000};
  // When set and it becomes true, the request is abandoned with Status::Cancelled within ~50 ms.
  const std::atomic<bool>* cancel = nullptr;
};

// Receives the decoded (de-chunked) body of a 2xx response as it arrives, with the time the bytes
// were read from the socket. Return false to stop reading (the request then returns OK with what
// was read).
using BodySink = std::function<bool(std::string_view bytes, Clock::time_point arrived)>;

// Sends one request. When `sink` is set and the status is 2xx, the body goes to the sink; otherwise
// it is collected in Response::body.
Result<Response> SendRequest(const Url& url, std::string_view method, std::string_view path,
                             std::string_view json_body, const RequestOptions& options,
                             const BodySink& sink = nullptr);

inline Result<Response> Get(const Url& url, std::string_view path, const RequestOptions& options) {
  return SendRequest(url, "GET", path, {}, options);
}
inline Result<Response> PostJson(const Url& url, std::string_view path, std::string_view json_body,
                                 const RequestOptions& options, const BodySink& sink = nullptr) {
  return SendRequest(url, "POST", path, json_body, options, sink);
}

// Incremental decoder for "Transfer-Encoding: chunked" bodies. Feed() accepts the raw bytes in
// pieces of any size and appends the payload to *out. Exposed for tests.
class ChunkedDecoder {
 public:
  // Returns an InvalidInput status on malformed framing.
  Status Feed(std::string_view bytes, std::string* out);
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone };
  State state_ = State::kSize;
  std::string line_;
  size_t remaining_ = 0;
};

}  // namespace spk::http
