#include "http/http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string>

namespace spk::http {
namespace {

constexpr auto kPollSlice = std::chrono::milliseconds(50);
constexpr size_t kMaxHeaderBytes = 64 * 1024;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Closes the socket when it goes out of scope.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

bool Cancelled(const RequestOptions& options) {
  return options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed);
}

// Waits until `fd` is ready for `events`, in slices so that cancellation is noticed. Returns OK
// when ready, Unavailable on timeout, Cancelled on cancellation.
Status WaitReady(int fd, short events, Clock::time_point deadline, const RequestOptions& options,
                 const std::string& what) {
  for (;;) {
    if (Cancelled(options)) return Status::Cancelled("request cancelled");
    auto now = Clock::now();
    if (now >= deadline) return Status::Unavailable(what);
    auto slice = std::min<Clock::duration>(deadline - now, kPollSlice);
    pollfd p{fd, events, 0};
    int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(slice).count());
    int rc = ::poll(&p, 1, std::max(ms, 1));
    if (rc > 0) return Status::Ok();
    if (rc < 0 && errno != EINTR) return Status::Unavailable(what + ": " + std::strerror(errno));
  }
}

Result<int> Connect(const Url& url, const RequestOptions& options) {
  const std::string where = url.ToString();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string port = std::to_string(url.port);
  int gai = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found);
  if (gai != 0) {
    return Status::Unavailable("cannot resolve " + where + ": " + gai_strerror(gai));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
      Status ready = WaitReady(fd, POLLOUT, Clock::now() + options.connect_timeout, options,
                               "connection timed out");
      int err = 0;
      socklen_t len = sizeof(err);
      if (ready.ok() && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        ::freeaddrinfo(found);
        return fd;
      }
      if (ready.code() == StatusCode::kCancelled) {
        ::close(fd);
        ::freeaddrinfo(found);
        return ready;
      }
      last_error = ready.ok() ? std::strerror(err) : ready.message();
    } else {
      last_error = std::strerror(errno);
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return Status::Unavailable("cannot connect to " + where + ": " + last_error +
                             " (is the server running and listening there?)");
}

Status SendAll(int fd, std::string_view data, Clock::time_point deadline,
               const RequestOptions& options) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      SPK_RETURN_IF_ERROR(WaitReady(fd, POLLOUT, deadline, options, "timed out sending request"));
      continue;
    }
    return Status::Unavailable(std::string("sending request failed: ") + std::strerror(errno));
  }
  return Status::Ok();
}

// Parses the status line and headers (everything before the blank line).
Status ParseHead(std::string_view head, Response* response) {
  size_t eol = head.find("\r\n");
  std::string_view status_line = head.substr(0, eol);
  if (status_line.substr(0, 5) != "HTTP/" || status_line.size() < 12) {
    return Status::Unavailable("malformed HTTP status line '" + std::string(status_line) + "'");
  }
  size_t sp = status_line.find(' ');
  std::string code(status_line.substr(sp + 1, 3));
  if (code.size() != 3 || !std::all_of(code.begin(), code.end(), ::isdigit)) {
    return Status::Unavailable("malformed HTTP status line '" + std::string(status_line) + "'");
  }
  response->status = std::stoi(code);
  while (eol != std::string_view::npos) {
    size_t start = eol + 2;
    eol = head.find("\r\n", start);
    std::string_view line =
        head.substr(start, eol == std::string_view::npos ? head.npos : eol - start);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    response->headers.emplace_back(Lower(Trim(line.substr(0, colon))),
                                   std::string(Trim(line.substr(colon + 1))));
  }
  return Status::Ok();
}

}  // namespace

std::string Url::ToString() const {
  return "http://" + host + ":" + std::to_string(port) + base_path;
}

Result<Url> ParseUrl(std::string_view text) {
  constexpr std::string_view kScheme = "http://";
  if (text.substr(0, 8) == "https://") {
    return Status::Usage("'" + std::string(text) +
                         "': https is not supported; use http:// to a local server");
  }
  if (text.substr(0, kScheme.size()) != kScheme) {
    return Status::Usage("'" + std::string(text) +
                         "' is not an http:// URL (expected http://host:port)");
  }
  std::string_view rest = text.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  Url url;
  if (slash != std::string_view::npos) {
    url.base_path = std::string(rest.substr(slash));
    while (!url.base_path.empty() && url.base_path.back() == '/') url.base_path.pop_back();
  }
  size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']') == std::string_view::npos) {
    std::string port(authority.substr(colon + 1));
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) ||
        std::stoi(port) == 0 || std::stoi(port) > 65535) {
      return Status::Usage("'" + std::string(text) + "': bad port '" + port +
                           "' (expected a number from 1 to 65535)");
    }
    url.port = std::stoi(port);
    authority = authority.substr(0, colon);
  }
  if (authority.size() >= 2 && authority.front() == '[' && authority.back() == ']') {
    authority = authority.substr(1, authority.size() - 2);
  }
  if (authority.empty()) return Status::Usage("'" + std::string(text) + "': missing host");
  url.host = std::string(authority);
  return url;
}

std::string Response::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return "";
}

Status ChunkedDecoder::Feed(std::string_view bytes, std::string* out) {
  while (!bytes.empty() && state_ != State::kDone) {
    switch (state_) {
      case State::kSize:
      case State::kDataEnd:
      case State::kTrailer: {
        size_t nl = bytes.find('\n');
        line_.append(bytes.substr(0, nl));
        if (line_.size() > 4096) return Status::InvalidInput("chunked encoding: line too long");
        if (nl == std::string_view::npos) return Status::Ok();
        bytes.remove_prefix(nl + 1);
        std::string_view line = Trim(line_);
        if (state_ == State::kDataEnd) {
          if (!line.empty())
            return Status::InvalidInput("chunked encoding: missing CRLF after chunk");
          state_ = State::kSize;
        } else if (state_ == State::kTrailer) {
          if (line.empty()) state_ = State::kDone;
        } else {
          line = line.substr(0, line.find(';'));
          if (line.empty() || line.size() > 15 ||
              !std::all_of(line.begin(), line.end(), ::isxdigit)) {
            return Status::InvalidInput("chunked encoding: bad chunk size '" + std::string(line) +
                                        "'");
          }
          remaining_ = std::stoull(std::string(line), nullptr, 16);
          state_ = remaining_ == 0 ? State::kTrailer : State::kData;
        }
        line_.clear();
        break;
      }
      case State::kData: {
        size_t take = std::min(remaining_, bytes.size());
        out->append(bytes.substr(0, take));
        bytes.remove_prefix(take);
        remaining_ -= take;
        if (remaining_ == 0) state_ = State::kDataEnd;
        break;
      }
      case State::kDone:
        break;
    }
  }
  return Status::Ok();
}

Result<Response> SendRequest(const Url& url, std::string_view method, std::string_view path,
                             std::string_view json_body, const RequestOptions& options,
                             const BodySink& sink) {
  const std::string target = url.base_path + std::string(path);
  const std::string where = std::string(method) + " " + url.ToString() + std::string(path);
  const auto start = Clock::now();
  const auto total_deadline = start + options.total_timeout;

  SPK_ASSIGN_OR_RETURN(int fd, Connect(url, options));
  Socket socket(fd);

  std::string request = std::string(method) + " " + target + " HTTP/1.1\r\nHost: " + url.host +
                        ":" + std::to_string(url.port) +
                        "\r\nConnection: close\r\nAccept: */*\r\nUser-Agent: sparkulator-bench\r\n";
  if (method == "POST") {
    request +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(json_body.size()) +
        "\r\n";
  }
  request += "\r\n";
  request.append(json_body);
  SPK_RETURN_IF_ERROR(SendAll(fd, request, total_deadline, options).WithContext(where));

  Response response;
  std::string head;
  bool head_done = false;
  bool chunked = false;
  long long content_left = -1;  // -1: read until close
  ChunkedDecoder decoder;
  std::string decoded;
  bool stopped = false;
  char buffer[16384];

  auto deliver = [&](std::string_view bytes, Clock::time_point arrived) -> Status {
    decoded.clear();
    std::string_view payload = bytes;
    if (chunked) {
      SPK_RETURN_IF_ERROR(decoder.Feed(bytes, &decoded).WithContext(where));
      payload = decoded;
    } else if (content_left >= 0) {
      payload =
          bytes.substr(0, static_cast<size_t>(std::min<long long>(content_left, bytes.size())));
      content_left -= static_cast<long long>(payload.size());
    }
    if (payload.empty()) return Status::Ok();
    bool success = response.status >= 200 && response.status < 300;
    if (sink && success) {
      if (!sink(payload, arrived)) stopped = true;
    } else {
      response.body.append(payload);
    }
    return Status::Ok();
  };
  auto complete = [&] { return chunked ? decoder.done() : content_left == 0; };

  for (;;) {
    if (head_done && complete()) break;
    auto idle_deadline = std::min(total_deadline, Clock::now() + options.idle_timeout);
    Status ready = WaitReady(fd, POLLIN, idle_deadline, options, "");
    if (!ready.ok()) {
      if (ready.code() == StatusCode::kCancelled) return ready;
      bool total = Clock::now() >= total_deadline;
      auto limit = total ? options.total_timeout : options.idle_timeout;
      return Status::Unavailable(
          where + ": timed out after " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) + " s " +
          (total ? "(whole request)" : "without data from the server"));
    }
    ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    auto arrived = Clock::now();
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return Status::Unavailable(where + ": connection error: " + std::strerror(errno));
    }
    if (n == 0) {
      if (!head_done)
        return Status::Unavailable(where + ": server closed the connection without answering");
      if (chunked || content_left > 0) {
        return Status::Unavailable(where + ": server closed the connection mid-response");
      }
      break;
    }
    std::string_view bytes(buffer, static_cast<size_t>(n));
    if (!head_done) {
      head.append(bytes);
      size_t end = head.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (head.size() > kMaxHeaderBytes)
          return Status::Unavailable(where + ": response header too large");
        continue;
      }
      SPK_RETURN_IF_ERROR(
          ParseHead(std::string_view(head).substr(0, end), &response).WithContext(where));
      head_done = true;
      chunked = Lower(response.Header("transfer-encoding")).find("chunked") != std::string::npos;
      std::string length = response.Header("content-length");
      if (!chunked && !length.empty()) content_left = std::atoll(length.c_str());
      if (method == "HEAD" || response.status == 204 || response.status == 304) content_left = 0;
      std::string rest = head.substr(end + 4);
      SPK_RETURN_IF_ERROR(deliver(rest, arrived));
    } else {
      SPK_RETURN_IF_ERROR(deliver(bytes, arrived));
    }
    if (stopped) break;
  }
  return response;
}

}  // namespace spk::http
