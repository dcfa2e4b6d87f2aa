#include "bench/arm.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <thread>

#include "base/test_util.h"
#include "io/fault_injection.h"

namespace spk::bench {
namespace {

using Words = std::vector<std::string>;

TEST(SplitCommandLine, QuotesAndEscapesWithoutAShell) {
  auto w = SplitCommandLine(
      "vllm serve 'my model' --port {port} --speculative-config "
      "'{\"method\": \"eagle3\", \"num_speculative_tokens\": 3}' \"a \\\"b\\\" $HOME\" c\\ d "
      "*.txt");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, (Words{"vllm", "serve", "my model", "--port", "{port}", "--speculative-config",
                       "{\"method\": \"eagle3\", \"num_speculative_tokens\": 3}", "a \"b\" $HOME",
                       "c d", "*.txt"}));
  EXPECT_EQ(*SplitCommandLine("  a   b  "), (Words{"a", "b"}));
  EXPECT_EQ(*SplitCommandLine("''"), (Words{""}));
}

TEST(SplitCommandLine, Unclosed) {
  test_util::ExpectError(SplitCommandLine("a 'b"), StatusCode::kUsage,
                         "unclosed ' in command: a 'b");
  test_util::ExpectError(SplitCommandLine("a \"b"), StatusCode::kUsage,
                         "unclosed \" in command: a \"b");
  test_util::ExpectError(SplitCommandLine("a \\"), StatusCode::kUsage,
                         "command ends with a lone backslash: a \\");
}

TEST(ParseArmSpec, UrlAndCommand) {
  auto url = ParseArmSpec("bf16=http://127.0.0.1:8000");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->name, "bf16");
  EXPECT_EQ(url->url, "http://127.0.0.1:8000");
  EXPECT_FALSE(url->launched());
  auto cmd = ParseArmSpec("w4a16=cmd:vllm serve T --port {port}");
  ASSERT_TRUE(cmd.ok());
  EXPECT_TRUE(cmd->launched());
  EXPECT_EQ(cmd->command, (Words{"vllm", "serve", "T", "--port", "{port}"}));
  test_util::ExpectError(ParseArmSpec("noequals"), StatusCode::kUsage,
                         "--arm 'noequals': expected NAME=http://host:port or NAME=cmd:COMMAND");
  test_util::ExpectError(ParseArmSpec("=http://x:1"), StatusCode::kUsage,
                         "--arm '=http://x:1': expected NAME=");
  test_util::ExpectError(ParseArmSpec("a=ftp://x"), StatusCode::kUsage,
                         "--arm a: 'ftp://x' is not an http:// URL");
  test_util::ExpectError(ParseArmSpec("a=cmd:   "), StatusCode::kUsage,
                         "--arm a: empty command after cmd:");
  test_util::ExpectError(ParseArmSpec("a=cmd:vllm serve 'T"), StatusCode::kUsage,
                         "--arm a: unclosed ' in command");
}

TEST(LaunchedServer, EarlyExitShowsLog) {
  char dir[] = "/tmp/spk-arm-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string log = std::string(dir) + "/server.log";
  LaunchedServer server(FileSystem::Default());
  ASSERT_TRUE(server.Start({"sh", "-c", "echo port={port} is bad; exit 3"}, 4242, log).ok());
  Status s = server.WaitHealthy(http::Url{"127.0.0.1", 1, ""}, std::chrono::seconds(10), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("exited with status 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("port=4242 is bad"), std::string::npos) << s.message();
  server.Stop();
}

TEST(LaunchedServer, StopKillsTheWholeGroupAndEscalates) {
  char dir[] = "/tmp/spk-arm-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string log = std::string(dir) + "/server.log";
  LaunchedServer server(FileSystem::Default());
  // Ignores SIGTERM, so Stop must escalate to SIGKILL after the grace period.
  ASSERT_TRUE(
      server.Start({"sh", "-c", "trap '' TERM; echo $VLLM_CACHE_ROOT; sleep 30 & wait"}, 1, log)
          .ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(server.Running());
  auto t0 = std::chrono::steady_clock::now();
  server.Stop(std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_FALSE(server.Running());
  EXPECT_NE(server.LogTail().find("spk-bench-cache-"), std::string::npos);
}

TEST(LaunchedServer, ALogThatCannotBeReadIsSaidInTheTailAndTheCacheDirIsRemoved) {
  char dir[] = "/tmp/spk-arm-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string log = std::string(dir) + "/server.log";
  FaultInjectingFileSystem fs(FileSystem::Default());
  fs.FailOperation(FileOp::kRead, "server.log", EIO);
  LaunchedServer server(&fs);
  ASSERT_TRUE(server.Start({"sh", "-c", "echo hello; exit 3"}, 4242, log).ok());
  Status s = server.WaitHealthy(http::Url{"127.0.0.1", 1, ""}, std::chrono::seconds(10), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("(cannot read the log: cannot read " + log), std::string::npos)
      << s.message();
  server.Stop();
  fs.ClearFaults();
  EXPECT_EQ(fs.ReadFile(log).value(), "hello\n");  // the child's log itself is whole
  ASSERT_TRUE(fs.RemoveAll(dir).ok());
}

}  // namespace
}  // namespace spk::bench
