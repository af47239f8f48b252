// watch.hpp — `sandglass watch`: a live one-screen view of GET /v1/stats, refreshed every
// `interval` until Ctrl-C (SIGINT or SIGTERM), or `count` times when count > 0.
//
// On a terminal each refresh clears the screen first; otherwise (a pipe, a file) refreshes
// follow each other. A refresh that cannot reach the daemon says so on the screen and the view
// goes on. Exit code: that of the last refresh (0, or 6 when the daemon could not be reached,
// or 1/2 for an error answer); 0 after Ctrl-C.
//
// Thread safety: call from the main thread only (it installs signal handlers).
#pragma once

#include "cli/daemon_client.hpp"
#include "cli/exit_codes.hpp"

#include <chrono>
#include <cstddef>

namespace sandglass::cli {

struct WatchOptions {
  std::chrono::milliseconds interval{1000};
  std::size_t count = 0;  // 0: until Ctrl-C
  bool json = false;      // each snapshot as the daemon's JSON, one a line
};

// Blocks until done.
ExitCode watch_stats(const DaemonClient& client, const WatchOptions& options);

}  // namespace sandglass::cli
