#include "stall.hpp"

#include "distribution.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <string>

namespace sandglass::bench {
namespace {

volatile sig_atomic_t g_stop_stalling = 0;

extern "C" void on_sigterm(int) { g_stop_stalling = 1; }

timespec to_timespec(Duration d) {
  const auto ns = std::chrono::nanoseconds{d}.count();
  return {.tv_sec = static_cast<time_t>(ns / 1'000'000'000), .tv_nsec = static_cast<long>(ns % 1'000'000'000)};
}

// The helper's whole life; only async-signal-safe calls (it is a fork of a threaded process).
[[noreturn]] void stall_loop(pid_t parent, StallSpec spec) {
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);  // the parent died before the line above
  const timespec run = to_timespec(spec.period - spec.length);
  const timespec stop = to_timespec(spec.length);
  while (g_stop_stalling == 0) {
    nanosleep(&run, nullptr);  // a SIGTERM cuts it short
    if (g_stop_stalling != 0) break;
    kill(parent, SIGSTOP);
    nanosleep(&stop, nullptr);
    kill(parent, SIGCONT);  // always after a SIGSTOP, also when asked to end meanwhile
  }
  _exit(0);
}

}  // namespace

StallSpec parse_stall(std::string_view text) {
  const std::size_t at = text.find('@');
  if (at == std::string_view::npos) {
    throw std::invalid_argument{"stall \"" + std::string{text} + "\": expected LENGTH@PERIOD, e.g. 50ms@1s"};
  }
  const StallSpec spec{.length = parse_duration(text.substr(0, at)),
                       .period = parse_duration(text.substr(at + 1))};
  if (spec.length <= Duration::zero() || spec.length >= spec.period) {
    throw std::invalid_argument{"stall \"" + std::string{text} +
                                "\": LENGTH must be positive and shorter than PERIOD"};
  }
  return spec;
}

Stall::Stall(StallSpec spec) {
  if (!spec.on()) return;
  const pid_t parent = getpid();
  child_ = fork();
  if (child_ < 0) throw std::runtime_error{"--stall: fork failed"};
  if (child_ == 0) stall_loop(parent, spec);
}

Stall::~Stall() {
  if (child_ <= 0) return;
  kill(child_, SIGTERM);
  int status = 0;
  while (waitpid(child_, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace sandglass::bench
