// rss_sampler.hpp — the peak resident set size of a process while a sampler object lives.
// getrusage's ru_maxrss is a peak since the process started, useless per load point; this
// reads /proc/PID/statm every few milliseconds instead, so a peak shorter than that may be
// missed.
//
//   RssSampler rss{};                 // this process, every 5 ms
//   run_point();
//   std::size_t peak = rss.peak_bytes();
//
// Thread safety: `peak_bytes` may be called from any thread.
#pragma once

#include <sandglass/deadline.hpp>

#include <atomic>
#include <cstddef>
#include <stop_token>
#include <string>
#include <thread>

namespace sandglass::bench {

// The resident set size of `pid` ("self" for this process); zero if it cannot be read.
std::size_t resident_bytes(const std::string& pid = "self");

class RssSampler {
 public:
  explicit RssSampler(std::string pid = "self",
                      Duration every = std::chrono::milliseconds{5});
  std::size_t peak_bytes() const noexcept { return peak_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::size_t> peak_{0};
  std::jthread thread_;  // last: stopped and joined first
};

}  // namespace sandglass::bench
