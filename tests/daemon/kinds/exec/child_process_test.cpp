#include "daemon/kinds/exec/child_process.hpp"

#include "kinds/exec/exec_test_support.hpp"

#include <doctest/doctest.h>

#include <signal.h>

#include <cerrno>
#include <optional>

using namespace std::chrono_literals;
using sandglass::daemon::ChildProcess;
using sandglass::daemon::ChildProcessOptions;
using sandglass::daemon::ChildReport;
using sandglass::daemon::CommandConfig;
using sandglass::testing::command;
using sandglass::testing::process_gone;

namespace {

// Longer than any test may take: only SIGTERM can end these commands.
constexpr std::chrono::milliseconds kOnlySigterm = 60s;

}  // namespace

TEST_SUITE("ChildProcess") {
  TEST_CASE("run collects the output and the exit status with a pidfd or without one") {
    ChildProcessOptions options;
    SUBCASE("pidfd") { options.use_pidfd = true; }
    SUBCASE("polling waitid") { options.use_pidfd = false; }
    ChildProcess child{command({"/bin/sh", "-c", "echo out; echo err >&2; exit 4"}, kOnlySigterm), options};
    const ChildReport report = child.run("");
    CHECK(report.exit_code == 4);
    CHECK_FALSE(report.signal);
    CHECK(report.out.bytes == "out\n");
    CHECK(report.err.bytes == "err\n");
    CHECK_FALSE(report.stopped);
    CHECK(process_gone(child.pid()));
  }

  TEST_CASE("a stop requested before run ends the command with SIGTERM as soon as run starts" *
            doctest::timeout(20)) {
    ChildProcessOptions options;
    SUBCASE("pidfd") { options.use_pidfd = true; }
    SUBCASE("polling waitid") { options.use_pidfd = false; }
    ChildProcess child{command({"/usr/bin/sleep", "30"}, kOnlySigterm), options};
    child.request_stop();
    const ChildReport report = child.run("");
    CHECK(report.stopped);
    CHECK_FALSE(report.exit_code);
    CHECK(report.signal == SIGTERM);
    CHECK(process_gone(child.pid()));
  }

  TEST_CASE("destroying a child that was never run kills and reaps it") {
    std::optional<ChildProcess> child{std::in_place, command({"/usr/bin/sleep", "30"}, kOnlySigterm)};
    const pid_t pid = child->pid();
    REQUIRE(::kill(pid, 0) == 0);
    child.reset();
    CHECK(process_gone(pid));
  }
}
