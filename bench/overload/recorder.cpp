#include "recorder.hpp"

#include <thread>

namespace sandglass::bench {

Recorder::Recorder(TimePoint start, std::span<const Arrival> arrivals)
    : start_{start}, arrivals_{arrivals}, records_(arrivals.size()) {}

void Recorder::completed(std::size_t i, TimePoint end, Duration busy) noexcept {
  finish(i, end <= deadline(i) ? Fate::on_time : Fate::late, end, busy, Reason::ok);
}

void Recorder::cancelled(std::size_t i, TimePoint end, Duration busy) noexcept {
  finish(i, Fate::cancelled, end, busy, Reason::cancelled_while_running);
}

void Recorder::failed(std::size_t i, TimePoint end, Duration busy) noexcept {
  finish(i, Fate::failed, end, busy, Reason::handler_error);
}

void Recorder::rejected(std::size_t i, TimePoint end, Reason reason) noexcept {
  finish(i, Fate::rejected, end, Duration::zero(), reason);
}

void Recorder::expired(std::size_t i, TimePoint end, Reason reason) noexcept {
  finish(i, Fate::expired, end, Duration::zero(), reason);
}

void Recorder::finish(std::size_t i, Fate fate, TimePoint end, Duration busy,
                      Reason reason) noexcept {
  JobRecord& r = records_[i];
  r.ended = end;
  r.busy = busy;
  r.fate = fate;
  r.reason = reason;
  // Pairs with the acquire load in finished(): whoever sees the count sees the record.
  finished_.fetch_add(1, std::memory_order_release);
}

bool Recorder::wait_finished(std::size_t count, TimePoint until) const {
  // Polled: a notification per job would cost the workers more than this costs the waiter.
  while (finished() < count) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  return true;
}

}  // namespace sandglass::bench
