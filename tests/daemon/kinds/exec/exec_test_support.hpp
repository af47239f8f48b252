// exec_test_support.hpp — what the tests of the exec kind and of ChildProcess share: a command
// built from its argv, and whether a process is gone.
#pragma once

#include <sandglass/daemon/daemon_config.hpp>

#include <signal.h>
#include <sys/types.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace sandglass::testing {

// A command running `argv`, with the default settings but `kill_grace`.
inline daemon::CommandConfig command(std::vector<std::string> argv,
                                     std::chrono::milliseconds kill_grace =
                                         daemon::CommandConfig{}.kill_grace) {
  daemon::CommandConfig c;
  c.argv = std::move(argv);
  c.kill_grace = kill_grace;
  return c;
}

// True once `pid` no longer names a process we could signal (reaped, never existed).
inline bool process_gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

}  // namespace sandglass::testing
