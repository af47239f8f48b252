// daemon_child.hpp — a sandglassd started by the soak mode: on 127.0.0.1, port 0, its port read
// from the one line it prints on stdout, its log (stderr) in a file, so that the drain summary
// it logs on SIGTERM can be read back.
//
//   DaemonChild d{"./build-cc/daemon/sandglassd", {"--workers", "4"}};   // Blocks
//   d.port(); d.pid();
//   d.signal(SIGTERM);
//   std::optional<int> code = d.wait_exit(20s);   // Blocks
//   std::string log = d.log();
//
// Thread safety: `signal`, `pid` and `port` may be called from any thread; the rest from one.
#pragma once

#include <sandglass/deadline.hpp>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sandglass::bench {

class DaemonChild {
 public:
  // Starts `path` with `--listen 127.0.0.1:0` and `args`; waits up to 30 s for its port.
  // Throws std::runtime_error (with its log) when it does not report one.
  DaemonChild(const std::string& path, const std::vector<std::string>& args);
  DaemonChild(const DaemonChild&) = delete;
  DaemonChild& operator=(const DaemonChild&) = delete;
  ~DaemonChild();  // SIGKILL if still running; removes the log file

  int pid() const noexcept { return pid_; }
  std::uint16_t port() const noexcept { return port_; }
  void signal(int sig) const;
  // Its exit code (128 + signal when killed), or nullopt if it still runs after `timeout`. Blocks.
  std::optional<int> wait_exit(Duration timeout);
  std::string log() const;

 private:
  int pid_ = -1;
  std::atomic<bool> exited_{false};
  std::uint16_t port_ = 0;
  std::string log_path_;
};

}  // namespace sandglass::bench
