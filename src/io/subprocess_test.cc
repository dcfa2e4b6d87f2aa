// RunProcess on /bin/sh: what a program prints on each stream, its exit status, a program that
// does not exist, one past its time limit (its whole process group dies), and the environment.
#include "io/subprocess.h"

#include <gtest/gtest.h>

namespace spk {
namespace {

using namespace std::chrono_literals;

ProcessResult Sh(const std::string& script,
                 std::vector<std::pair<std::string, std::string>> env = {},
                 std::chrono::milliseconds timeout = 20s) {
  auto r = RunProcess({"/bin/sh", "-c", script}, env, timeout);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : ProcessResult{};
}

TEST(RunProcess, CollectsBothStreamsAndTheExitStatus) {
  ProcessResult r = Sh("echo to-out; echo to-err >&2; exit 3");
  EXPECT_EQ(r.out, "to-out\n");
  EXPECT_EQ(r.err, "to-err\n");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.description, "exited with status 3");
  EXPECT_TRUE(Sh("true").ok());
}

TEST(RunProcess, ReadsMoreThanAPipeHolds) {
  // 1 MiB on stdout while stderr is written too: neither pipe may fill and block the child.
  ProcessResult r = Sh("head -c 1048576 /dev/zero; head -c 200000 /dev/zero >&2");
  EXPECT_TRUE(r.ok()) << r.description;
  EXPECT_EQ(r.out.size(), 1048576u);
  EXPECT_EQ(r.err.size(), 200000u);
}

TEST(RunProcess, AProgramThatDoesNotExistExits127WithTheReason) {
  auto r = RunProcess({"/nonexistent/python3"}, {}, 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
  EXPECT_NE(r->err.find("cannot run /nonexistent/python3"), std::string::npos) << r->err;
}

TEST(RunProcess, KillsTheWholeGroupAtTheTimeLimit) {
  auto start = std::chrono::steady_clock::now();
  // The grandchild holds the pipes open: the limit must end the wait all the same.
  ProcessResult r = Sh("sleep 30 & sleep 30", {}, 300ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.description, "ran past its time limit and was killed");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(RunProcess, PassesTheEnvironmentWithReplacements) {
  ProcessResult r = Sh("echo \"$SPK_TEST_A/$HOME\"", {{"SPK_TEST_A", "x"}, {"HOME", "/h"}});
  EXPECT_EQ(r.out, "x//h\n");
}

}  // namespace
}  // namespace spk
