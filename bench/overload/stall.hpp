// stall.hpp — `Stall`: a helper process that stops the bench process (SIGSTOP) for `length`
// once every `period` and then continues it (SIGCONT), as a VM pause, a swap storm or a long
// garbage-collection pause would: every thread stops at once, clocks go on.
//
//   const StallSpec spec = parse_stall("50ms@1s");   // throws std::invalid_argument
//   { Stall stall{spec}; run(); }                     // stalls only while `stall` lives
//
// Thread safety: `Stall` is made and destroyed on one thread. The helper is a forked child that
// only sleeps and sends signals; it dies with its parent (PR_SET_PDEATHSIG).
#pragma once

#include <sandglass/deadline.hpp>

#include <sys/types.h>

#include <string_view>

namespace sandglass::bench {

struct StallSpec {
  Duration length{};  // how long each stop lasts; zero: no stalls
  Duration period{};  // from one stop to the next
  bool on() const noexcept { return length > Duration::zero(); }
};

// "LENGTH@PERIOD", e.g. "50ms@1s"; LENGTH must be shorter than PERIOD.
StallSpec parse_stall(std::string_view text);

class Stall {
 public:
  // Starts the helper; the first stop comes one period minus one length from now. Does
  // nothing when `spec` is off.
  explicit Stall(StallSpec spec);
  Stall(const Stall&) = delete;
  Stall& operator=(const Stall&) = delete;
  // Ends the helper; if it was about to stop this process it continues it first. Blocks until
  // it has exited.
  ~Stall();

 private:
  pid_t child_ = -1;
};

}  // namespace sandglass::bench
