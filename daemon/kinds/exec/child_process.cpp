#include "daemon/kinds/exec/child_process.hpp"

#include <sandglass/deadline.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

namespace sandglass::daemon {

namespace {

using std::chrono::milliseconds;

// Without a pidfd, how often run() asks waitid whether the command has exited.
constexpr milliseconds kExitPollInterval{10};
// Bytes run() reads from one stream per wake-up, so that a command that writes without pause
// cannot keep it from seeing a stop request or the exit.
constexpr std::size_t kReadPerWakeup = 1 << 20;
// Bytes run() reads from one stream after the exit: what the pipe holds, unless a process that
// escaped the group keeps writing. What is left unread counts as truncated output.
constexpr std::size_t kReadAfterExit = 16 << 20;

[[noreturn]] void throw_errno(int error, const char* what) {
  throw std::system_error{error, std::generic_category(), what};
}

// posix_spawn* functions return an error number instead of setting errno.
void check(int error, const char* what) {
  if (error != 0) throw_errno(error, what);
}

// Moves `fd` to a number above 2, so that placing the pipes on 0, 1 and 2 in the child never
// overwrites another of them (a daemon started with a closed stdin gets a pipe on 0).
UniqueFd above_stdio(UniqueFd fd) {
  if (fd.get() > 2) return fd;
  const int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) throw_errno(errno, "fcntl(F_DUPFD_CLOEXEC)");
  return UniqueFd{moved};
}

void set_nonblocking(const UniqueFd& fd) {
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) < 0) {
    throw_errno(errno, "fcntl(O_NONBLOCK)");
  }
}

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

// Both ends close on exec; the child gets its ends through dup2, which clears that flag.
Pipe make_pipe() {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) throw_errno(errno, "pipe2");
  Pipe pipe{UniqueFd{fds[0]}, UniqueFd{fds[1]}};
  pipe.read = above_stdio(std::move(pipe.read));
  pipe.write = above_stdio(std::move(pipe.write));
  return pipe;
}

class SpawnFileActions {
 public:
  SpawnFileActions() { check(::posix_spawn_file_actions_init(&actions_), "posix_spawn"); }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
  ~SpawnFileActions() { ::posix_spawn_file_actions_destroy(&actions_); }
  posix_spawn_file_actions_t* get() noexcept { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

class SpawnAttributes {
 public:
  SpawnAttributes() { check(::posix_spawnattr_init(&attributes_), "posix_spawn"); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  ~SpawnAttributes() { ::posix_spawnattr_destroy(&attributes_); }
  posix_spawnattr_t* get() noexcept { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
};

// The null-terminated array of C strings that posix_spawn wants; points into `strings`.
std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> result;
  result.reserve(strings.size() + 1);
  for (const std::string& s : strings) result.push_back(const_cast<char*>(s.c_str()));
  result.push_back(nullptr);
  return result;
}

// write(2) that reports a closed reader as EPIPE without raising SIGPIPE, whose default
// disposition would end the daemon. The signal is blocked in this thread for the call, and if
// the write raised it, taken off this thread's pending set again (unless it was pending before).
ssize_t write_without_sigpipe(int fd, const char* data, std::size_t size) noexcept {
  sigset_t pipe_only;
  ::sigemptyset(&pipe_only);
  ::sigaddset(&pipe_only, SIGPIPE);
  sigset_t old_mask;
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old_mask);
  sigset_t pending;
  ::sigpending(&pending);
  const bool was_pending = ::sigismember(&pending, SIGPIPE) == 1;

  const ssize_t written = ::write(fd, data, size);
  const int error = errno;
  if (written < 0 && error == EPIPE && !was_pending) {
    const timespec zero{};
    while (::sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  errno = error;
  return written;
}

// Reads what `fd` has now, up to `budget` bytes, keeping at most `limit` bytes in `captured`;
// closes `fd` at end of file or on an error. True if it stopped because of the budget.
bool read_available(UniqueFd& fd, CapturedOutput& captured, std::size_t limit,
                    std::size_t budget) {
  std::array<char, 64 * 1024> buffer;
  std::size_t total = 0;
  while (fd) {
    if (total >= budget) return true;
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return false;
    if (n <= 0) {
      fd.reset();
      return false;
    }
    const auto got = static_cast<std::size_t>(n);
    total += got;
    const std::size_t keep = std::min(got, limit - std::min(limit, captured.bytes.size()));
    captured.bytes.append(buffer.data(), keep);
    if (keep < got) captured.truncated = true;
  }
  return false;
}

// A poll timeout in milliseconds until `t`, rounded up; 0 once `t` has passed.
int timeout_until(TimePoint t) {
  const milliseconds left = std::chrono::ceil<milliseconds>(saturating_sub(t, Clock::now()));
  if (left <= milliseconds::zero()) return 0;
  return static_cast<int>(std::min<milliseconds::rep>(left.count(), INT_MAX));
}

// The shorter of two poll timeouts, where -1 is "none".
int shorter(int a, int b) { return a < 0 ? b : b < 0 ? a : std::min(a, b); }

}  // namespace

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

ChildProcess::ChildProcess(const CommandConfig& command, ChildProcessOptions options)
    : max_output_bytes_{command.max_output_bytes}, kill_grace_{command.kill_grace} {
  if (command.argv.empty()) throw_errno(EINVAL, "posix_spawn: empty argv");

  Pipe in = make_pipe();
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  set_nonblocking(in.write);
  set_nonblocking(out.read);
  set_nonblocking(err.read);
  stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_) throw_errno(errno, "eventfd");

  SpawnFileActions actions;
  check(::posix_spawn_file_actions_adddup2(actions.get(), in.read.get(), STDIN_FILENO),
        "posix_spawn");
  check(::posix_spawn_file_actions_adddup2(actions.get(), out.write.get(), STDOUT_FILENO),
        "posix_spawn");
  check(::posix_spawn_file_actions_adddup2(actions.get(), err.write.get(), STDERR_FILENO),
        "posix_spawn");
  // Also closes descriptors that other threads opened without O_CLOEXEC.
  check(::posix_spawn_file_actions_addclosefrom_np(actions.get(), 3), "posix_spawn");
  check(::posix_spawn_file_actions_addchdir_np(actions.get(), command.working_directory.c_str()),
        "posix_spawn");

  SpawnAttributes attributes;
  sigset_t none;
  ::sigemptyset(&none);
  sigset_t all;
  ::sigfillset(&all);
  check(::posix_spawnattr_setflags(attributes.get(), POSIX_SPAWN_SETPGROUP |
                                                         POSIX_SPAWN_SETSIGMASK |
                                                         POSIX_SPAWN_SETSIGDEF),
        "posix_spawn");
  check(::posix_spawnattr_setpgroup(attributes.get(), 0), "posix_spawn");
  check(::posix_spawnattr_setsigmask(attributes.get(), &none), "posix_spawn");
  check(::posix_spawnattr_setsigdefault(attributes.get(), &all), "posix_spawn");

  std::vector<std::string> env_strings;
  env_strings.reserve(command.env.size());
  for (const auto& [key, value] : command.env) env_strings.push_back(key + "=" + value);
  const std::vector<char*> argv = c_strings(command.argv);
  const std::vector<char*> envp = c_strings(env_strings);

  // glibc's posix_spawn returns only once the child has called execve, with its error if that
  // or a file action failed.
  pid_t pid = -1;
  const int error =
      ::posix_spawn(&pid, argv[0], actions.get(), attributes.get(), argv.data(), envp.data());
  if (error != 0) {
    throw std::system_error{error, std::generic_category(),
                            command.argv[0] + " (in " + command.working_directory + ")"};
  }
  pid_ = pid;
  // Nothing below throws: from here on the destructor must run to reap the child.

  stdin_ = std::move(in.write);
  stdout_ = std::move(out.read);
  stderr_ = std::move(err.read);
#ifdef SYS_pidfd_open
  if (options.use_pidfd) {
    // Works on a child that has already exited, as long as it is not reaped. Always O_CLOEXEC.
    const long pidfd = ::syscall(SYS_pidfd_open, pid_, 0);
    if (pidfd >= 0) pidfd_.reset(static_cast<int>(pidfd));
  }
#else
  static_cast<void>(options);
#endif
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    signal_group(SIGKILL);
    reap(nullptr);
  }
}

void ChildProcess::request_stop() noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(stop_.get(), &one, sizeof one);
}

ChildReport ChildProcess::run(std::string_view input) {
  ChildReport report;
  std::size_t input_written = 0;
  if (input.empty()) stdin_.reset();
  bool term_sent = false;
  bool kill_sent = false;
  TimePoint kill_at = TimePoint::max();

  for (bool done = false; !done;) {
    // poll() skips entries with a negative fd (closed streams) and leaves their revents 0.
    enum Slot { kIn, kOut, kErr, kExit, kStop, kSlots };
    std::array<pollfd, kSlots> fds{};
    fds[kIn] = {stdin_.get(), POLLOUT, 0};
    fds[kOut] = {stdout_.get(), POLLIN, 0};
    fds[kErr] = {stderr_.get(), POLLIN, 0};
    fds[kExit] = {pidfd_.get(), POLLIN, 0};
    fds[kStop] = {term_sent ? -1 : stop_.get(), POLLIN, 0};
    int timeout_ms = pidfd_ ? -1 : static_cast<int>(kExitPollInterval.count());
    if (term_sent && !kill_sent) timeout_ms = shorter(timeout_ms, timeout_until(kill_at));

    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "poll");
    }

    if (fds[kStop].revents != 0) {
      report.stopped = true;
      term_sent = true;
      signal_group(SIGTERM);
      kill_at = saturating_add(Clock::now(), kill_grace_);
    }
    if (term_sent && !kill_sent && Clock::now() >= kill_at) {
      signal_group(SIGKILL);
      kill_sent = true;
    }
    if (fds[kIn].revents != 0) {
      while (stdin_ && input_written < input.size()) {
        const ssize_t n = write_without_sigpipe(stdin_.get(), input.data() + input_written,
                                                input.size() - input_written);
        if (n > 0) {
          input_written += static_cast<std::size_t>(n);
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else if (n < 0 && errno == EAGAIN) {
          break;
        } else {
          stdin_.reset();  // EPIPE: the command closed its stdin; the rest is dropped
        }
      }
      if (input_written == input.size()) stdin_.reset();
    }
    if (fds[kOut].revents != 0) {
      read_available(stdout_, report.out, max_output_bytes_, kReadPerWakeup);
    }
    if (fds[kErr].revents != 0) {
      read_available(stderr_, report.err, max_output_bytes_, kReadPerWakeup);
    }
    done = (!pidfd_ || fds[kExit].revents != 0) && exited();
  }

  // The command has exited but is not reaped, so its pid, which is the group id, cannot have
  // been reused: what is left in the group gets SIGKILL. Then take what the pipes still hold;
  // output of processes that keep them open after that is not waited for.
  signal_group(SIGKILL);
  if (read_available(stdout_, report.out, max_output_bytes_, kReadAfterExit)) {
    report.out.truncated = true;
  }
  if (read_available(stderr_, report.err, max_output_bytes_, kReadAfterExit)) {
    report.err.truncated = true;
  }
  stdin_.reset();
  stdout_.reset();
  stderr_.reset();
  reap(&report);
  return report;
}

void ChildProcess::signal_group(int signal) const noexcept {
  // ESRCH once nothing is left of the group; nothing to do then.
  ::kill(-pid_, signal);
}

bool ChildProcess::exited() const noexcept {
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return errno == ECHILD;  // reaped behind our back (SIGCHLD ignored): it is gone
  }
  return info.si_pid != 0;
}

void ChildProcess::reap(ChildReport* report) noexcept {
  int status = 0;
  pid_t result = -1;
  do {
    result = ::waitpid(pid_, &status, 0);
  } while (result < 0 && errno == EINTR);
  reaped_ = true;
  pidfd_.reset();
  if (result != pid_ || report == nullptr) return;
  if (WIFEXITED(status)) report->exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) report->signal = WTERMSIG(status);
}

}  // namespace sandglass::daemon
