// child_process.hpp (private) — `ChildProcess`, one configured command run to its end: started
// with posix_spawn in its own process group, fed its stdin and drained of its output by `run()`
// on the calling thread, stopped on request with SIGTERM and, after a grace period, SIGKILL.
// Also `UniqueFd`, an owned file descriptor.
//
//   ChildProcess child{command};                       // spawns; throws std::system_error
//   auto reg = token.on_cancel([&child]() noexcept { child.request_stop(); });
//   ChildReport report = child.run(stdin_text);        // blocks until the command exits
//
// The child gets exactly the configured argv (no shell, no PATH lookup) and environment, the
// configured working directory, an empty signal mask and default signal dispositions (the
// daemon blocks SIGTERM in all its threads; without this its children would ignore SIGTERM),
// and only file descriptors 0, 1 and 2, which are pipes to us. (One exception: glibc's
// posix_spawn leaves its own two internal signals, 32 and 33, ignored in the child; a C library
// that uses them installs its handlers again.)
//
// No thread and no timer per child: `run()` waits with poll() on the pipes, a pidfd for the
// exit (polling waitid every 10 ms where pidfd_open is not available) and an eventfd that
// `request_stop()` writes; the grace period is a poll timeout.
//
// A job leaves no processes behind: once the command has exited (on its own or stopped),
// whatever is left in its process group gets SIGKILL, before the command is reaped (so the
// group id cannot have been reused). A descendant that moved to another group or session
// escapes this.
//
// Thread safety: `request_stop()` may be called from any thread, concurrently with `run()`;
// everything else belongs to one thread.
#pragma once

#include <sandglass/daemon/daemon_config.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sandglass::daemon {

// An owned file descriptor; closes it on destruction. -1 is "none".
class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_{fd} {}
  UniqueFd(UniqueFd&& other) noexcept : fd_{other.release()} {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

// At most `limit` bytes of one output stream; the rest was read and dropped.
struct CapturedOutput {
  std::string bytes;       // raw bytes, not necessarily UTF-8
  bool truncated = false;  // the stream had more than `limit` bytes
};

// How a command ended.
struct ChildReport {
  std::optional<int> exit_code;  // set when it exited
  std::optional<int> signal;     // set when a signal killed it
  CapturedOutput out;
  CapturedOutput err;
  bool stopped = false;  // run() saw request_stop() before it saw the command exit
};

struct ChildProcessOptions {
  // Wait for the exit on a pidfd; false forces the fallback that polls waitid (for tests).
  bool use_pidfd = true;
};

class ChildProcess {
 public:
  // Starts `command` (argv, env, working_directory; max_output_bytes and kill_grace are used by
  // run()). Throws std::system_error when it cannot be started, e.g. ENOENT for a missing
  // program or working directory.
  explicit ChildProcess(const CommandConfig& command, ChildProcessOptions options = {});
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // If run() did not finish: kills the process group and reaps the command. Blocks until the
  // command is gone (SIGKILL cannot be ignored, so briefly).
  ~ChildProcess();

  pid_t pid() const noexcept { return pid_; }

  // Makes run() stop the command: SIGTERM to its group at once, SIGKILL after the grace period.
  // Cheap and noexcept (one write to an eventfd), so it may run in a cancellation callback;
  // before run() it takes effect as soon as run() starts.
  void request_stop() noexcept;

  // Writes `input` to the command's stdin and then closes it, collects stdout and stderr, and
  // waits until the command has exited; then kills what is left of its group and reaps it.
  // Call once. Blocks. Throws std::system_error if poll fails.
  ChildReport run(std::string_view input);

 private:
  void signal_group(int signal) const noexcept;
  // True once the command has exited (it is a zombie, not reaped yet).
  bool exited() const noexcept;
  // Waits for the command and records how it ended in `report` (if not null).
  void reap(ChildReport* report) noexcept;

  std::size_t max_output_bytes_;
  std::chrono::milliseconds kill_grace_;
  UniqueFd stdin_;   // our ends, non-blocking
  UniqueFd stdout_;
  UniqueFd stderr_;
  UniqueFd stop_;    // eventfd written by request_stop()
  UniqueFd pidfd_;   // readable once the command exits; none when pidfd_open is unavailable
  pid_t pid_ = -1;   // also its process group id
  bool reaped_ = false;
};

}  // namespace sandglass::daemon
