// sandglassd: parses options, starts the daemon, drains on SIGTERM or SIGINT.
// Exit codes: 0 after a drain, 1 when it cannot start, 2 for an invalid config or command line.
#include <sandglass/daemon/daemon.hpp>

#include "daemon/config/command_line.hpp"
#include "daemon/logging.hpp"

#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <pthread.h>

int main(int argc, char** argv) {
  using namespace sandglass::daemon;
  CommandLine cl;
  try {
    cl = parse_command_line(argc, argv);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "sandglassd: %s\n", e.what());
    return 2;
  }
  if (cl.action != CommandLine::Action::run) {
    std::fputs(cl.text.c_str(), stdout);
    return 0;
  }
  setup_logging(cl.config.log_level, cl.config.log_format);

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
    const DrainSummary s = daemon.wait();
    using sandglass::Reason;
    const auto& st = s.stats;
    spdlog::info(
        "stopped: submitted={} completed={} failed={} rejected={} expired={} cancelled={} "
        "drained_in_time={}",
        st.submitted, st.count(Reason::ok) + st.count(Reason::completed_after_cancel),
        st.count(Reason::handler_error),
        st.count(Reason::shutting_down) + st.count(Reason::budget_too_small) +
            st.count(Reason::deadline_implausible) + st.count(Reason::queue_full) +
            st.count(Reason::shed),
        st.count(Reason::expired_in_queue) + st.count(Reason::too_late_to_start),
        st.count(Reason::cancelled_in_queue) + st.count(Reason::cancelled_while_running),
        s.drained_in_time);
  } catch (const ConfigError& e) {
    spdlog::critical("invalid configuration: {}", e.what());
    return 2;
  } catch (const std::exception& e) {
    spdlog::critical("cannot start: {}", e.what());
    return 1;
  }
  return 0;
}
