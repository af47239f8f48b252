#include "daemon/kinds/builtin_kinds.hpp"

#include "kinds/exec/exec_test_support.hpp"

#include <sandglass/cancel.hpp>
#include <sandglass/job_context.hpp>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::BudgetPolicy;
using sandglass::CancelCause;
using sandglass::CancelSource;
using sandglass::Cancelled;
using sandglass::Deadline;
using sandglass::JobContext;
using sandglass::JobHandler;
using sandglass::daemon::ArgsError;
using sandglass::daemon::CommandConfig;
using sandglass::daemon::JobKind;
using sandglass::testing::command;
using sandglass::testing::process_gone;

namespace {

JobKind exec_kind(const std::string& name, const CommandConfig& config) {
  return sandglass::daemon::make_exec_kind({{name, config}});
}

boost::json::object args_for(std::string_view name) { return {{"command", name}}; }

// What one run of a handler left behind.
struct Ran {
  std::string result;                    // what it passed to set_result
  std::optional<CancelCause> cancelled;  // set when it threw Cancelled
  std::string error;                     // what() of any other exception it threw
};

// Prepares `args` with `kind` and runs the handler on this thread. Blocks.
Ran run_job(const JobKind& kind, const boost::json::object& args,
            const CancelSource& source = CancelSource{}) {
  const BudgetPolicy policy;
  JobContext ctx{1, "exec", Deadline::after(60s), source.token(), policy};
  JobHandler handler = kind.prepare(args);
  Ran ran;
  try {
    handler(ctx);
  } catch (const Cancelled& c) {
    ran.cancelled = c.cause();
  } catch (const std::exception& e) {
    ran.error = e.what();
  }
  ran.result = ctx.take_result();
  return ran;
}

boost::json::object parse_result(const Ran& ran) {
  return boost::json::parse(ran.result).as_object();
}

std::size_t open_fd_count() {
  const std::filesystem::directory_iterator fds{"/proc/self/fd"};
  return static_cast<std::size_t>(std::distance(fds, std::filesystem::directory_iterator{}));
}

// A fresh directory, removed with its contents at the end of the test.
struct TempDir {
  TempDir() {
    std::string name = (std::filesystem::temp_directory_path() / "exec_kind_test.XXXXXX").string();
    REQUIRE(::mkdtemp(name.data()) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::filesystem::path path;
};

// A FIFO the command writes its pids into: reading it blocks until the command has reached that
// point of its script, which orders the test's cancellation after it without sleeping.
struct Fifo {
  explicit Fifo(std::filesystem::path p) : path{std::move(p)} {
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  }
  // Blocks until a writer opens the FIFO; returns the first line.
  std::string read_line() const {
    std::ifstream in{path};
    std::string line;
    std::getline(in, line);
    return line;
  }
  // Lets a read_line() that still waits for the writer return (with an empty line), so a test
  // whose command never got that far fails instead of hanging.
  void release_reader() const {
    const int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
  }
  std::filesystem::path path;
};

// Makes this process the reaper of orphaned descendants for a scope (PR_SET_CHILD_SUBREAPER).
struct SubreaperScope {
  SubreaperScope() { REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0); }
  ~SubreaperScope() { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
  SubreaperScope(const SubreaperScope&) = delete;
  SubreaperScope& operator=(const SubreaperScope&) = delete;
};

// As the daemon does in all its threads (sigwait in main).
void block_sigterm_in_this_thread() {
  sigset_t set;
  ::sigemptyset(&set);
  ::sigaddset(&set, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

}  // namespace

TEST_SUITE("exec kind") {
  TEST_CASE("echo captures stdout and the job completes with exit code 0") {
    const Ran ran = run_job(exec_kind("echo", command({"/bin/echo", "hello", "world"})),
                            args_for("echo"));
    CHECK(ran.error.empty());
    CHECK_FALSE(ran.cancelled);
    CHECK(ran.result ==
          R"({"command":"echo","exit_code":0,"signal":null,"stdout":"hello world\n",)"
          R"("stderr":"","stdout_truncated":false,"stderr_truncated":false})");
  }

  TEST_CASE("cat echoes the request stdin") {
    const JobKind kind = exec_kind("cat", [] {
      CommandConfig c = command({"/bin/cat"});
      c.max_output_bytes = 4 << 20;
      return c;
    }());
    std::string input;
    SUBCASE("a short text") { input = "line one\nline two\n"; }
    SUBCASE("more than a pipe holds while the command writes it back") {
      for (int i = 0; input.size() < (3 << 20); ++i) input += std::to_string(i) + '\n';
    }
    SUBCASE("nothing when the request has no stdin") {}
    boost::json::object args = args_for("cat");
    if (!input.empty()) args["stdin"] = input;
    const Ran ran = run_job(kind, args);
    CHECK(ran.error.empty());
    const boost::json::object result = parse_result(ran);
    CHECK(result.at("exit_code") == 0);
    CHECK(result.at("stdout").as_string() == input);
    CHECK(result.at("stdout_truncated") == false);
  }

  TEST_CASE("a command that does not read its stdin neither blocks nor raises SIGPIPE") {
    // 4 MiB cannot fit in the pipe; `true` exits without reading, so writing the rest fails with
    // EPIPE, whose SIGPIPE would end this process if it were raised.
    boost::json::object args = args_for("true");
    args["stdin"] = std::string(4 << 20, 'x');
    const Ran ran = run_job(exec_kind("true", command({"/bin/true"})), args);
    CHECK(ran.error.empty());
    CHECK(parse_result(ran).at("exit_code") == 0);
    sigset_t pending;
    ::sigpending(&pending);
    CHECK(::sigismember(&pending, SIGPIPE) == 0);
  }

  TEST_CASE("a non-zero exit status fails the job and keeps the result") {
    const Ran ran = run_job(
        exec_kind("fail", command({"/bin/sh", "-c", "echo partial; echo oops >&2; exit 3"})),
        args_for("fail"));
    CHECK(ran.error == "command fail exited with status 3");
    CHECK(ran.result ==
          R"({"command":"fail","exit_code":3,"signal":null,"stdout":"partial\n",)"
          R"("stderr":"oops\n","stdout_truncated":false,"stderr_truncated":false})");
  }

  TEST_CASE("a command killed by a signal that we did not send fails the job") {
    const Ran ran = run_job(exec_kind("suicide", command({"/bin/sh", "-c", "kill -KILL $$"})),
                            args_for("suicide"));
    CHECK(ran.error == "command suicide was killed by signal 9");
    CHECK_FALSE(ran.cancelled);
    const boost::json::object result = parse_result(ran);
    CHECK(result.at("exit_code").is_null());
    CHECK(result.at("signal") == SIGKILL);
  }

  TEST_CASE("output over the limit is truncated and the command is not blocked") {
    // 50 MB on each stream at once; nothing reads them but the job.
    CommandConfig c = command({"/bin/sh", "-c",
                               "/usr/bin/head -c 50000000 /dev/zero >&2 & "
                               "/usr/bin/head -c 50000000 /dev/zero; wait"});
    c.max_output_bytes = 1000;
    const Ran ran = run_job(exec_kind("flood", c), args_for("flood"));
    CHECK(ran.error.empty());
    const boost::json::object result = parse_result(ran);
    CHECK(result.at("exit_code") == 0);
    CHECK(result.at("stdout").as_string() == std::string(1000, '\0'));
    CHECK(result.at("stderr").as_string() == std::string(1000, '\0'));
    CHECK(result.at("stdout_truncated") == true);
    CHECK(result.at("stderr_truncated") == true);
  }

  TEST_CASE("output exactly at the limit is not truncated") {
    CommandConfig c = command({"/usr/bin/head", "-c", "1000", "/dev/zero"});
    c.max_output_bytes = 1000;
    const boost::json::object result =
        parse_result(run_job(exec_kind("head", c), args_for("head")));
    CHECK(result.at("stdout").as_string().size() == 1000);
    CHECK(result.at("stdout_truncated") == false);
  }

  TEST_CASE("bytes that are not UTF-8 become U+FFFD and valid characters stay") {
    // a, a lone 0xFF, é (C3 A9), an overlong slash (C0 AF), a cut-off é (C3 at the end).
    const Ran ran = run_job(
        exec_kind("bytes", command({"/usr/bin/printf", "a\\377\\303\\251\\300\\257\\303"})),
        args_for("bytes"));
    CHECK(ran.error.empty());
    CHECK(parse_result(ran).at("stdout").as_string() ==
          "a\xEF\xBF\xBD\xC3\xA9\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  }

  TEST_CASE("the environment is exactly the configured one") {
    CommandConfig c = command({"/usr/bin/env"});
    SUBCASE("two variables") {
      c.env = {{"GREETING", "two words"}, {"A", "1"}};
      CHECK(parse_result(run_job(exec_kind("env", c), args_for("env"))).at("stdout") ==
            "A=1\nGREETING=two words\n");
    }
    SUBCASE("none") {
      REQUIRE(std::getenv("PATH") != nullptr);  // this process has one to leak
      CHECK(parse_result(run_job(exec_kind("env", c), args_for("env"))).at("stdout") == "");
    }
  }

  TEST_CASE("the command runs in the configured working directory") {
    TempDir dir;
    CommandConfig c = command({"/bin/pwd"});
    c.working_directory = dir.path.string();
    CHECK(parse_result(run_job(exec_kind("pwd", c), args_for("pwd"))).at("stdout").as_string() ==
          dir.path.string() + "\n");
  }

  TEST_CASE("the command gets only stdin stdout stderr and no blocked or ignored signals") {
    // This thread blocks SIGTERM and the process ignores SIGPIPE, as a daemon may; a descriptor
    // without O_CLOEXEC is open too. None of it may reach the command.
    const int leaky = ::dup(STDERR_FILENO);
    REQUIRE(leaky >= 0);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    struct sigaction previous {};
    ::sigaction(SIGPIPE, &ignore, &previous);
    sigset_t term;
    ::sigemptyset(&term);
    ::sigaddset(&term, SIGTERM);
    sigset_t old_mask;
    ::pthread_sigmask(SIG_BLOCK, &term, &old_mask);

    const JobKind kind = sandglass::daemon::make_exec_kind(
        {{"fds", command({"/usr/bin/ls", "/proc/self/fd"})},
         {"signals", command({"/usr/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"})}});
    const boost::json::object fds = parse_result(run_job(kind, args_for("fds")));
    const boost::json::object signals = parse_result(run_job(kind, args_for("signals")));

    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    ::sigaction(SIGPIPE, &previous, nullptr);
    ::close(leaky);

    CHECK(fds.at("stdout") == "0\n1\n2\n3\n");  // 3 is ls's own handle on /proc/self/fd
    // "SigBlk:\t<hex>\nSigIgn:\t<hex>\n", bit n-1 standing for signal n. glibc's posix_spawn
    // leaves its two internal signals (32 and 33, below SIGRTMIN) ignored; the C library of the
    // command installs its own handlers for them if it uses them.
    std::istringstream lines{std::string{signals.at("stdout").as_string()}};
    std::string blocked_label, blocked_hex, ignored_label, ignored_hex;
    lines >> blocked_label >> blocked_hex >> ignored_label >> ignored_hex;
    REQUIRE(blocked_label == "SigBlk:");
    REQUIRE(ignored_label == "SigIgn:");
    const unsigned long long glibc_internal = (1ULL << 31) | (1ULL << 32);
    CHECK(std::stoull(blocked_hex, nullptr, 16) == 0);
    CHECK((std::stoull(ignored_hex, nullptr, 16) & ~glibc_internal) == 0);
  }

  TEST_CASE("a program that cannot be started fails the job naming the command and the reason") {
    SUBCASE("missing program") {
      const Ran ran = run_job(exec_kind("missing", command({"/nonexistent/program"})),
                              args_for("missing"));
      CHECK(ran.error ==
            "command missing could not be started: /nonexistent/program (in /): No such file or "
            "directory");
      CHECK(ran.result ==
            R"({"command":"missing","exit_code":null,"signal":null,"stdout":"","stderr":"",)"
            R"("stdout_truncated":false,"stderr_truncated":false})");
    }
    SUBCASE("missing working directory") {
      CommandConfig c = command({"/bin/true"});
      c.working_directory = "/nonexistent/dir";
      const Ran ran = run_job(exec_kind("nowhere", c), args_for("nowhere"));
      CHECK(ran.error ==
            "command nowhere could not be started: /bin/true (in /nonexistent/dir): No such file "
            "or directory");
    }
  }

  TEST_CASE("a job cancelled before it starts runs nothing") {
    TempDir dir;
    const std::filesystem::path marker = dir.path / "ran";
    CancelSource source;
    source.cancel(CancelCause::shutdown);
    const Ran ran =
        run_job(exec_kind("touch", command({"/usr/bin/touch", marker.string()})), args_for("touch"),
                source);
    CHECK(ran.cancelled == CancelCause::shutdown);
    CHECK(ran.result ==
          R"({"command":"touch","exit_code":null,"signal":null,"stdout":"","stderr":"",)"
          R"("stdout_truncated":false,"stderr_truncated":false})");
    CHECK_FALSE(std::filesystem::exists(marker));
  }

  TEST_CASE("cancelling a running command stops it with SIGTERM and the job is cancelled" *
            doctest::timeout(20)) {
    // The grace period is far longer than the test may take, so only SIGTERM can end `sleep`,
    // and it only can if the child's signal mask was cleared: the worker thread blocks SIGTERM.
    TempDir dir;
    const Fifo fifo{dir.path / "pid"};
    CommandConfig c = command(
        {"/bin/sh", "-c", "echo $$ > " + fifo.path.string() + "; exec /usr/bin/sleep 30"});
    c.kill_grace = 60s;
    const JobKind kind = exec_kind("sleep", c);
    CancelCause cause = CancelCause::caller;
    SUBCASE("by the caller") { cause = CancelCause::caller; }
    SUBCASE("by the deadline") { cause = CancelCause::deadline; }
    const std::size_t fds_before = open_fd_count();

    CancelSource source;
    Ran ran;
    std::jthread worker{[&] {
      block_sigterm_in_this_thread();
      ran = run_job(kind, args_for("sleep"), source);
      fifo.release_reader();
    }};
    const std::string pid_line = fifo.read_line();
    source.cancel(cause);
    worker.join();

    REQUIRE_FALSE(pid_line.empty());
    CHECK(ran.cancelled == cause);
    CHECK(ran.result ==
          R"({"command":"sleep","exit_code":null,"signal":15,"stdout":"","stderr":"",)"
          R"("stdout_truncated":false,"stderr_truncated":false})");
    CHECK(process_gone(std::stoi(pid_line)));
    CHECK(open_fd_count() == fds_before);
  }

  TEST_CASE("a command that ignores SIGTERM gets SIGKILL after the grace period and leaves no "
            "process behind" * doctest::timeout(20)) {
    // The command's own child (`sleep 30 &`, in the same process group) is orphaned when the
    // command dies. So that it is not left to PID 1 (which may not reap in a container), this
    // process becomes the subreaper for the test: the orphan becomes our child and waitpid()
    // tells exactly how it ended.
    const SubreaperScope subreaper;
    TempDir dir;
    const Fifo fifo{dir.path / "pids"};
    CommandConfig c = command({"/bin/sh", "-c",
                               "trap '' TERM; /usr/bin/sleep 30 & echo $! $$ > " +
                                   fifo.path.string() + "; wait"});
    c.kill_grace = 200ms;
    const JobKind kind = exec_kind("stubborn", c);
    const std::size_t fds_before = open_fd_count();

    CancelSource source;
    Ran ran;
    std::jthread worker{[&] {
      block_sigterm_in_this_thread();
      ran = run_job(kind, args_for("stubborn"), source);
      fifo.release_reader();
    }};
    std::istringstream pids{fifo.read_line()};
    source.cancel(CancelCause::caller);
    worker.join();

    pid_t grandchild = 0;
    pid_t child = 0;
    pids >> grandchild >> child;
    REQUIRE(grandchild > 0);
    REQUIRE(child > 0);
    CHECK(ran.cancelled == CancelCause::caller);
    const boost::json::object result = parse_result(ran);
    CHECK(result.at("exit_code").is_null());
    CHECK(result.at("signal") == SIGKILL);
    CHECK(process_gone(child));
    int status = 0;
    REQUIRE(::waitpid(grandchild, &status, 0) == grandchild);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    CHECK(process_gone(grandchild));
    CHECK(open_fd_count() == fds_before);
  }

  TEST_CASE("what a command started in the background is killed when the command exits") {
    // As a subreaper this process inherits the orphaned `sleep` and can tell how it ended.
    const SubreaperScope subreaper;
    const Ran ran = run_job(
        exec_kind("spawner", command({"/bin/sh", "-c", "/usr/bin/sleep 30 > /dev/null & echo $!"})),
        args_for("spawner"));
    CHECK(ran.error.empty());
    const pid_t background = std::stoi(std::string{parse_result(ran).at("stdout").as_string()});
    int status = 0;
    REQUIRE(::waitpid(background, &status, 0) == background);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
  }

  TEST_CASE("prepare rejects bad args naming the field") {
    CommandConfig no_stdin = command({"/bin/true"});
    no_stdin.allow_stdin = false;
    const JobKind kind = sandglass::daemon::make_exec_kind(
        {{"cat", command({"/bin/cat"})}, {"true", no_stdin}});
    std::string field;
    std::string message;
    const auto reject = [&](const boost::json::object& args) {
      try {
        kind.prepare(args);
        FAIL("prepare accepted ", boost::json::serialize(args));
      } catch (const ArgsError& e) {
        field = e.field();
        message = e.what();
      }
    };
    SUBCASE("unknown command") {
      reject({{"command", "rm"}});
      CHECK(field == "args.command");
      CHECK(message == "unknown command \"rm\"");
    }
    SUBCASE("no command") {
      reject({});
      CHECK(field == "args.command");
    }
    SUBCASE("command that is not a string") {
      reject({{"command", 7}});
      CHECK(field == "args.command");
    }
    SUBCASE("stdin for a command that does not allow it") {
      reject({{"command", "true"}, {"stdin", "x"}});
      CHECK(field == "args.stdin");
      CHECK(message == "is not allowed for command \"true\"");
    }
    SUBCASE("stdin that is not a string") {
      reject({{"command", "cat"}, {"stdin", 42}});
      CHECK(field == "args.stdin");
      CHECK(message == "must be a string");
    }
    SUBCASE("an unknown field") {
      reject({{"command", "cat"}, {"argv", boost::json::array{"/bin/sh"}}});
      CHECK(field == "args.argv");
    }
  }

  TEST_CASE("no file descriptor is left open after jobs that complete fail or never start") {
    const JobKind kind = sandglass::daemon::make_exec_kind(
        {{"echo", command({"/bin/echo", "hi"})},
         {"cat", command({"/bin/cat"})},
         {"fail", command({"/bin/false"})},
         {"missing", command({"/nonexistent/program"})}});
    const std::size_t before = open_fd_count();
    CHECK(run_job(kind, args_for("echo")).error.empty());
    CHECK(run_job(kind, {{"command", "cat"}, {"stdin", "x"}}).error.empty());
    CHECK(run_job(kind, args_for("fail")).error == "command fail exited with status 1");
    CHECK_FALSE(run_job(kind, args_for("missing")).error.empty());
    CHECK(open_fd_count() == before);
  }
}
