#include "http/http_client.h"

#include <gtest/gtest.h>

#include "base/test_util.h"

namespace spk::http {
namespace {

TEST(ParseUrl, HostPortAndPrefix) {
  auto url = ParseUrl("http://127.0.0.1:8001/api/");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->host, "127.0.0.1");
  EXPECT_EQ(url->port, 8001);
  EXPECT_EQ(url->base_path, "/api");
  EXPECT_EQ(url->ToString(), "http://127.0.0.1:8001/api");
  auto plain = ParseUrl("http://localhost");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->port, 80);
}

TEST(ParseUrl, RejectsOtherSchemesAndBadPorts) {
  EXPECT_EQ(ParseUrl("https://x:1").status().code(), StatusCode::kUsage);
  test_util::ExpectError(ParseUrl("127.0.0.1:8000"), StatusCode::kUsage, "is not an http:// URL");
  test_util::ExpectError(ParseUrl("http://x:99999"), StatusCode::kUsage,
                         "bad port '99999' (expected a number from 1 to 65535)");
  test_util::ExpectError(ParseUrl("http://x:"), StatusCode::kUsage, "bad port ''");
  test_util::ExpectError(ParseUrl("http://:80"), StatusCode::kUsage, "missing host");
}

TEST(ChunkedDecoder, DecodesWhenSplitAnywhere) {
  const std::string raw = "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nTrailer: x\r\n\r\n";
  for (size_t cut = 0; cut <= raw.size(); ++cut) {
    ChunkedDecoder decoder;
    std::string out;
    ASSERT_TRUE(decoder.Feed(raw.substr(0, cut), &out).ok());
    ASSERT_TRUE(decoder.Feed(raw.substr(cut), &out).ok());
    EXPECT_EQ(out, "hello, world");
    EXPECT_TRUE(decoder.done());
  }
}

TEST(ChunkedDecoder, RejectsBadSize) {
  ChunkedDecoder decoder;
  std::string out;
  test_util::ExpectError(decoder.Feed("zz\r\n", &out), StatusCode::kInvalidInput,
                         "bad chunk size 'zz'");
  ChunkedDecoder missing_crlf;
  test_util::ExpectError(missing_crlf.Feed("2\r\nabX\r\n", &out), StatusCode::kInvalidInput,
                         "missing CRLF after chunk");
}

TEST(SendRequest, UnreachableServerSaysSo) {
  // Port 1 on localhost is essentially never listening.
  auto url = ParseUrl("http://127.0.0.1:1");
  ASSERT_TRUE(url.ok());
  RequestOptions options;
  options.connect_timeout = std::chrono::milliseconds(500);
  auto response = Get(*url, "/health", options);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(response.status().message().find("cannot connect to http://127.0.0.1:1"),
            std::string::npos);
}

}  // namespace
}  // namespace spk::http
