// daemon_process.hpp — the real sandglassd binary as a child process of a test, on an ephemeral
// loopback port: started with `--listen 127.0.0.1:0`, its port read from its one stdout line.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace sandglass::testing {

// Writes `text` to a fresh file in the temporary folder and returns its path.
std::string write_temp_file(const std::string& name_hint, const std::string& text);

class DaemonProcess {
 public:
  // Starts sandglassd with `args` (and `--listen 127.0.0.1:0` unless they name an address) and
  // waits for its port. Throws
  // std::runtime_error if it does not report one within 30 s.
  explicit DaemonProcess(std::vector<std::string> args = {});
  // The same, with sandglassd run by `launcher` (a program and its arguments, e.g. setpriv with
  // other credentials), which must exec sandglassd in its own place: pid() is then the daemon's.
  DaemonProcess(std::vector<std::string> args, std::vector<std::string> launcher);
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  ~DaemonProcess();  // SIGKILL if still running

  std::uint16_t port() const noexcept { return port_; }
  pid_t pid() const noexcept { return pid_; }

  void signal(int sig);
  // Waits for the process to exit; its exit code (128 + signal if killed), or nullopt on timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  // What it wrote to stderr so far (its log).
  std::string log() const;

 private:
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
  std::string log_path_;
};

// Runs sandglassd with `args` to completion (for --help, --check-config, bad flags); returns the
// exit code and what it printed on stdout and stderr.
struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
RunResult run_sandglassd(const std::vector<std::string>& args);

// Counts /proc/PID/fd.
std::size_t open_fds(pid_t pid);

// A loopback port that was free a moment ago (bound to port 0, then closed).
std::uint16_t free_port();

}  // namespace sandglass::testing
