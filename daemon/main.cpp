// sandglassd: parses options, starts the daemon, drains on SIGTERM or SIGINT; a second one ends
// the drain at once.
// Exit codes: 0 after a drain, 1 when it cannot start, 2 for an invalid config or command line.
#include <sandglass/daemon/daemon.hpp>

#include "daemon/cluster/cluster_node.hpp"
#include "daemon/config/command_line.hpp"
#include "daemon/logging.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <pthread.h>
#include <sys/resource.h>

#include <thread>

namespace {

// Each connection is a descriptor, and the default server.max_connections (1024) equals the
// usual soft limit of open files: raise the soft limit to the hard one, as far as it allows.
void raise_open_files_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur >= limit.rlim_max) {
    spdlog::info("open files limit: {}", limit.rlim_cur);
    return;
  }
  const rlim_t was = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("cannot raise the open files limit from {} to {}: {}", was, limit.rlim_max,
                 std::strerror(errno));
    return;
  }
  spdlog::info("raised the open files limit from {} to {}", was, limit.rlim_cur);
}

// "stopped: submitted=... completed=... failed=... rejected=... expired=... cancelled=...",
// each outcome counted under its state (state_of: the one table in outcome.hpp).
void log_drain_summary(const sandglass::daemon::DrainSummary& s) {
  std::array<std::uint64_t, sandglass::kStateCount> by_state{};
  for (std::size_t i = 0; i < sandglass::kReasonCount; ++i) {
    const auto reason = static_cast<sandglass::Reason>(i);
    by_state[static_cast<std::size_t>(sandglass::state_of(reason))] += s.stats.count(reason);
  }
  using sandglass::State;
  const auto count = [&](State state) { return by_state[static_cast<std::size_t>(state)]; };
  spdlog::info(
      "stopped: submitted={} completed={} failed={} rejected={} expired={} cancelled={} "
      "drained_in_time={}",
      s.stats.submitted, count(State::completed), count(State::failed), count(State::rejected),
      count(State::expired), count(State::cancelled), s.drained_in_time);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sandglass::daemon;
  CommandLine cl;
  try {
    cl = parse_command_line(argc, argv);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "sandglassd: %s\n", e.what());
    return 2;
  }
  if (cl.action == CommandLine::Action::migrate) {
    try {
      std::fputs(cluster::migrate_only(*cl.config.cluster).c_str(), stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sandglassd: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (cl.action != CommandLine::Action::run) {
    std::fputs(cl.text.c_str(), stdout);
    return 0;
  }
  setup_logging(cl.config.log_level, cl.config.log_format);
  raise_open_files_limit();

  // Signals are taken by sigwait below, never by a handler: block them before any thread
  // starts, so every thread inherits the mask. Writes to a closed pipe fail with EPIPE instead.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  try {
    Daemon daemon{cl.config, builtin_kinds(cl.config)};
    daemon.start();
    std::printf("listening on %s\n", daemon.listen_address().c_str());
    std::fflush(stdout);
    spdlog::info("listening on {} with {} workers, queue capacity {}", daemon.listen_address(),
                 cl.config.runtime.workers, cl.config.runtime.capacity);

    int signal = 0;
    sigwait(&stop_signals, &signal);
    spdlog::info("received {}: draining for up to {} ms", signal == SIGTERM ? "SIGTERM" : "SIGINT",
                 cl.config.drain_timeout.count());
    daemon.request_stop();
    // A second signal ends the drain at once. Signals stay blocked in every thread: this one
    // takes the next with sigwait; once the drain is over, a signal sent to it ends its wait.
    std::atomic<bool> drained{false};
    std::thread second_signal{[&] {
      int again = 0;
      sigwait(&stop_signals, &again);
      if (drained.load(std::memory_order_acquire)) return;  // pairs with the store below
      spdlog::info("received {} again: ending the drain now",
                   again == SIGTERM ? "SIGTERM" : "SIGINT");
      daemon.end_drain();
    }};
    const DrainSummary summary = daemon.wait();
    drained.store(true, std::memory_order_release);
    pthread_kill(second_signal.native_handle(), SIGTERM);
    second_signal.join();
    log_drain_summary(summary);
  } catch (const ConfigError& e) {
    spdlog::critical("invalid configuration: {}", e.what());
    return 2;
  } catch (const std::exception& e) {
    spdlog::critical("cannot start: {}", e.what());
    return 1;
  }
  return 0;
}
