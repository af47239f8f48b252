// custom_daemon: your own sandglassd with one more job kind, built from the installed library.
//
//   find_package(sandglass CONFIG REQUIRED)
//   target_link_libraries(custom_daemon PRIVATE sandglass::daemon)
//
//   custom_daemon [--config FILE] [--listen HOST:PORT]     (port 0 picks a free one)
//   curl -X POST 127.0.0.1:PORT/v1/jobs -d '{"kind":"primes","args":{"below":100000}}'
//   {"id":1,"kind":"primes","state":"completed","reason":"ok","result":{"count":9592},...}
//
// It serves everything sandglassd serves (the built-in kinds, /metrics, /healthz, /readyz,
// budgets, admission, drain on SIGTERM) plus `primes`, which counts the primes below
// `args.below` and stops at its next checkpoint when its deadline passes or its client cancels.
// Prints "listening on HOST:PORT" once it serves. Exit codes: 0 after a drain, 1 when it cannot
// start, 2 for an invalid config or command line.
#include <sandglass/daemon/daemon.hpp>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <pthread.h>
#include <string>
#include <string_view>

namespace {

namespace sd = sandglass::daemon;

// {"below": N} -> {"count": primes below N}. Checks its token every 4096 candidates: a
// checkpoint is one atomic load, the deadline's timer sets it.
sd::JobKind primes_kind() {
  return {.prepare = [](const boost::json::object& args) -> sandglass::JobHandler {
    sd::reject_unknown_keys(args, {"below"});
    const std::int64_t below = sd::require_int(args, "below", 0, 100'000'000);
    return [below](sandglass::JobContext& ctx) {
      std::int64_t count = 0;
      for (std::int64_t n = 2; n < below; ++n) {
        if (n % 4096 == 0) ctx.checkpoint();  // throws Cancelled once the job is cancelled
        bool prime = true;
        for (std::int64_t d = 2; d * d <= n; ++d) {
          if (n % d == 0) {
            prime = false;
            break;
          }
        }
        count += prime ? 1 : 0;
      }
      ctx.set_result(boost::json::serialize(boost::json::object{{"count", count}}));
    };
  }};
}

int usage(const char* message) {
  std::fprintf(stderr, "custom_daemon: %s\nusage: custom_daemon [--config FILE] [--listen HOST:PORT]\n", message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  sd::DaemonConfig config;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string_view flag = argv[i];
      if (i + 1 == argc) return usage("a flag without its value");
      if (flag == "--config") {
        config = sd::load_config_file(argv[++i]);
      } else if (flag == "--listen") {  // a --config after it would replace it
        sd::apply_setting(config, "server.listen", argv[++i]);
      } else {
        return usage("unknown flag");
      }
    }
    config.validate();
  } catch (const sd::ConfigError& e) {
    std::fprintf(stderr, "custom_daemon: %s\n", e.what());
    return 2;
  }

  // As sandglassd does: the stop signals are taken by sigwait, so block them before any thread
  // starts; a write to a closed connection fails with EPIPE instead of killing the process.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  try {
    sd::KindRegistry kinds = sd::builtin_kinds(config);  // sleep, spin, exec, forward, sql
    kinds.add("primes", primes_kind());
    sd::Daemon daemon{config, std::move(kinds)};
    daemon.start();
    std::printf("listening on %s\n", daemon.listen_address().c_str());
    std::fflush(stdout);

    int signal = 0;
    sigwait(&stop_signals, &signal);
    daemon.request_stop();  // drains for up to the config's drain timeout
    const sd::DrainSummary s = daemon.wait();
    std::printf("drained: submitted=%llu in_time=%s\n",
                static_cast<unsigned long long>(s.stats.submitted), s.drained_in_time ? "yes" : "no");
  } catch (const sd::ConfigError& e) {
    std::fprintf(stderr, "custom_daemon: invalid configuration: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_daemon: cannot start: %s\n", e.what());
    return 1;
  }
  return 0;
}
